import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import net, { type AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from "jose";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { apiKeysCommand } from "../scripts/api-keys.js";
import type { AuthSettings } from "../src/auth/settings.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, countRows, scriptedModel, threadRows } from "./helpers/fixtures.js";
import { asUser, createTestApp, listen, testAuth, TEST_JWT, tokenFor, type SentEvent } from "./helpers/http.js";
import { servedRoutes } from "./helpers/openapi.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

let app: ReturnType<typeof createTestApp>["app"];
let sent: SentEvent[];
let chatTurn: ReturnType<typeof createChatTurn>;

beforeAll(() => {
  ({ app, sent } = createTestApp(bed.db.pool));
  chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
});
beforeEach(() => {
  sent.length = 0;
});

/** Every API route, as [method, path, body]. */
const apiRoutes = (threadId: string, messageId: string): [string, string, unknown][] => [
  ["POST", "/api/chat", { messageId, content: "hi" }],
  ["GET", `/api/threads/${threadId}/messages`, undefined],
  ["GET", `/api/threads/${threadId}/messages/${messageId}/variants`, undefined],
  ["GET", `/api/threads/${threadId}/debug`, undefined],
  ["POST", `/api/threads/${threadId}/messages/${messageId}/regenerate`, {}],
  [
    "POST",
    "/api/ui/chat",
    {
      id: threadId,
      messages: [{ id: messageId, role: "user", parts: [{ type: "text", text: "hi" }] }],
      trigger: "submit-message",
    },
  ],
];

const call = (
  target: { request: typeof app.request },
  [method, path, body]: [string, string, unknown],
  headers: Record<string, string> = {},
) =>
  target.request(path, {
    method,
    headers: { "content-type": "application/json", ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** A thread of Bob's with one answered turn. */
async function bobsThread() {
  const event = chatEvent({ content: "Bob's secret plans", userId: "bob" });
  bed.model.script({ text: "Noted." });
  expect((await execute(chatTurn, event)).error).toBeUndefined();
  bed.model.reset();
  return { threadId: event.data.messageId, messageId: event.data.messageId };
}

describe("without credentials", () => {
  it("every API route answers 401 with a WWW-Authenticate challenge and says what to send; nothing is sent or written", async () => {
    const { threadId, messageId } = await bobsThread();
    const before = await countRows(bed.db.pool);
    for (const route of apiRoutes(threadId, messageId)) {
      const attempts: Record<string, string>[] = [
        {},
        { authorization: "Basic Ym9iOnNlY3JldA==" },
        { "x-threadline-user": "bob" },
      ];
      for (const headers of attempts) {
        const response = await call(app, route, headers);
        expect(response.status, `${route[0]} ${route[1]} ${JSON.stringify(headers)}`).toBe(401);
        expect(response.headers.get("www-authenticate")).toMatch(/^Bearer realm="threadline"/);
        const body = (await response.json()) as { error: string; code: string };
        expect(body.code).toBe("unauthenticated");
        expect(body.error).toMatch(/Authorization: Bearer <API key> or Authorization: Bearer <JWT/);
      }
    }
    // And every other route the app serves under /api (threads, search, export, memories, ... and
    // any added later), found from the app itself, with its parameters filled in.
    const served = servedRoutes(app).filter(
      (route) => route.split(" ")[1]!.startsWith("/api/") && !route.endsWith(" /api/inngest"),
    );
    expect(served.length).toBeGreaterThan(apiRoutes(threadId, messageId).length);
    for (const route of served) {
      const [method, template] = route.split(" ") as [string, string];
      const response = await call(app, [
        method,
        template.replace(/\{\w+\}/g, randomUUID()),
        method === "GET" || method === "DELETE" ? undefined : {},
      ]);
      expect(response.status, route).toBe(401);
    }
    // An unknown API path is refused before it is looked up: no route list for strangers.
    expect((await app.request("/api/nothing-here")).status).toBe(401);
    expect(sent).toEqual([]);
    expect(await countRows(bed.db.pool)).toEqual(before);
  });

  it("/health and the Inngest endpoint need no user credentials", async () => {
    expect((await app.request("/health")).status).toBe(200);
    expect((await app.request("/api/inngest")).status).toBe(200);
  });
});

describe("another user's thread", () => {
  it("answers 404 exactly like an unknown thread on every route, and nothing is written", async () => {
    const { threadId, messageId } = await bobsThread();
    const bobsRows = await threadRows(bed.db.pool, threadId);
    const before = await countRows(bed.db.pool);
    const alice = asUser(app, "alice");

    const unknown = randomUUID();
    for (const [method, path, body] of apiRoutes(threadId, messageId).slice(1)) {
      const asAlice = method === "GET" ? await alice.get(path) : await alice.post(path, body);
      const missing =
        method === "GET"
          ? await alice.get(path.replace(threadId, unknown))
          : await alice.post(path.replace(threadId, unknown), body);
      expect(asAlice.status, path).toBe(404);
      expect(missing.status, path).toBe(404);
      expect(await asAlice.text(), path).toBe(await missing.text());
    }
    // The owner still reads it.
    expect((await asUser(app, "bob").get(`/api/threads/${threadId}/messages`)).status).toBe(200);

    // A message posted into Bob's thread is sent as Alice's, and running it writes nothing.
    const posted = await alice.post("/api/chat", { messageId: randomUUID(), threadId, content: "Let me in" });
    expect([202, 404]).toContain(posted.status);
    expect(sent.map((event) => event.data.userId)).toEqual(sent.map(() => "alice"));
    for (const event of sent)
      expect((await execute(chatTurn, event)).error).toMatchObject({ name: "NonRetriableError" });

    expect(await countRows(bed.db.pool)).toEqual(before);
    expect(await threadRows(bed.db.pool, threadId)).toEqual(bobsRows);
    expect(bed.model.requests).toHaveLength(0);
  });
});

describe("bearer JWTs (shared secret)", () => {
  const route = (): [string, string, unknown] => ["POST", "/api/chat", { messageId: randomUUID(), content: "hi" }];
  const now = () => Math.floor(Date.now() / 1000);

  it("a valid token is accepted and its sub is the user the event carries", async () => {
    const response = await call(app, route(), bearer(await tokenFor("carol")));
    expect(response.status).toBe(202);
    expect(sent[0]!.data.userId).toBe("carol");
  });

  it("expired, wrongly signed, wrong-audience, wrong-issuer, expiry-less and malformed tokens are 401, saying why", async () => {
    const withoutExpiry = await new SignJWT({})
      .setProtectedHeader({ alg: "HS256" })
      .setSubject("carol")
      .setIssuer(TEST_JWT.issuer)
      .setAudience(TEST_JWT.audience)
      .sign(new TextEncoder().encode(TEST_JWT.secret));
    const cases: [string, string, RegExp][] = [
      ["expired", await tokenFor("carol", { issuedAt: now() - 7200, expiresAt: now() - 60 }), /expired/],
      [
        "wrongly signed",
        await tokenFor("carol", { secret: "another-secret-that-is-also-32-characters-long" }),
        /signature/,
      ],
      ["wrong audience", await tokenFor("carol", { audience: "some-other-api" }), /aud claim/],
      ["wrong issuer", await tokenFor("carol", { issuer: "https://evil.test" }), /iss claim/],
      ["without expiry", withoutExpiry, /exp claim/],
      ["not a JWT", "not-a-jwt", /not a valid JWT/],
    ];
    for (const [name, token, reason] of cases) {
      const response = await call(app, route(), bearer(token));
      expect(response.status, name).toBe(401);
      expect(response.headers.get("www-authenticate"), name).toMatch(
        /error="invalid_token", error_description="[^"]+"/,
      );
      expect(((await response.json()) as { error: string }).error, name).toMatch(reason);
    }
    expect(sent).toEqual([]);
  });

  it("tolerates the configured clock skew and no more", async () => {
    const skewed: AuthSettings = { ...testAuth, jwt: { ...testAuth.jwt!, clockSkewSeconds: 30 } };
    const tolerant = createTestApp(bed.db.pool, { auth: skewed }).app;
    const justExpired = await tokenFor("carol", { issuedAt: now() - 3600, expiresAt: now() - 10 });
    expect((await call(tolerant, route(), bearer(justExpired))).status).toBe(202);
    expect((await call(app, route(), bearer(justExpired))).status).toBe(401);
    const longExpired = await tokenFor("carol", { issuedAt: now() - 3600, expiresAt: now() - 60 });
    expect((await call(tolerant, route(), bearer(longExpired))).status).toBe(401);
  });

  it("takes the user from the configured claim, and refuses a token without a usable one", async () => {
    const byClaim = createTestApp(bed.db.pool, { auth: { ...testAuth, jwt: { ...testAuth.jwt!, userClaim: "uid" } } });
    const sign = (claims: Record<string, unknown>) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: "HS256" })
        .setSubject("provider|123")
        .setIssuer(TEST_JWT.issuer)
        .setAudience(TEST_JWT.audience)
        .setExpirationTime("1h")
        .sign(new TextEncoder().encode(TEST_JWT.secret));
    expect((await call(byClaim.app, route(), bearer(await sign({ uid: "dave" })))).status).toBe(202);
    expect(byClaim.sent[0]!.data.userId).toBe("dave");
    for (const claims of [
      {},
      { uid: 42 },
      { uid: "" },
      { uid: "nul\u0000" },
      { uid: "lone \uD800 surrogate" },
      { uid: "x".repeat(201) },
    ]) {
      const response = await call(byClaim.app, route(), bearer(await sign(claims)));
      expect(response.status, JSON.stringify(claims)).toBe(401);
      expect(((await response.json()) as { error: string }).error).toMatch(/uid claim/);
    }
    expect(byClaim.sent).toHaveLength(1);
  });
});

describe("bearer JWTs (JWKS URL)", () => {
  let jwksServer: Server;
  let jwksUrl: string;
  let signingKey: CryptoKey;
  let strangerKey: CryptoKey;
  let jwksRequests = 0;

  beforeAll(async () => {
    const pair = await generateKeyPair("ES256");
    signingKey = pair.privateKey;
    strangerKey = (await generateKeyPair("ES256")).privateKey;
    const jwks = { keys: [{ ...(await exportJWK(pair.publicKey)), kid: "key-1", alg: "ES256", use: "sig" }] };
    jwksServer = createServer((_request, response) => {
      jwksRequests += 1;
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(jwks));
    });
    await new Promise<void>((resolve) => jwksServer.listen(0, "127.0.0.1", resolve));
    jwksUrl = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}/.well-known/jwks.json`;
  });
  afterAll(() => new Promise<void>((resolve) => jwksServer.close(() => resolve())));

  const providerToken = (key: CryptoKey, kid: string, audience = "threadline-api") =>
    new SignJWT({})
      .setProtectedHeader({ alg: "ES256", kid })
      .setSubject("erin")
      .setIssuer("https://login.example.test/")
      .setAudience(audience)
      .setExpirationTime("5m")
      .sign(key);

  const jwksAuth = (url: string): AuthSettings => ({
    dev: false,
    jwt: {
      key: { jwksUrl: url },
      issuer: "https://login.example.test/",
      audience: "threadline-api",
      clockSkewSeconds: 5,
      userClaim: "sub",
    },
  });

  it("accepts a token signed by a key of the provider's JWKS and refuses others", async () => {
    const { app: provider, sent: providerSent } = createTestApp(bed.db.pool, { auth: jwksAuth(jwksUrl) });
    const read = (token: string) =>
      provider.request(`/api/threads/${randomUUID()}/messages`, { headers: bearer(token) });

    expect((await read(await providerToken(signingKey, "key-1"))).status).toBe(404);
    const posted = await provider.request("/api/chat", {
      method: "POST",
      headers: { ...bearer(await providerToken(signingKey, "key-1")), "content-type": "application/json" },
      body: JSON.stringify({ messageId: randomUUID(), content: "hi" }),
    });
    expect(posted.status).toBe(202);
    expect(providerSent[0]!.data.userId).toBe("erin");
    expect(jwksRequests).toBeGreaterThan(0);

    const strangerSigned = await read(await providerToken(strangerKey, "key-1"));
    expect(strangerSigned.status).toBe(401);
    expect(((await strangerSigned.json()) as { error: string }).error).toMatch(/signature/);
    expect((await read(await providerToken(strangerKey, "unknown-key"))).status).toBe(401);
    expect((await read(await providerToken(signingKey, "key-1", "another-api"))).status).toBe(401);
    expect((await read(await tokenFor("erin"))).status).toBe(401);
  });

  it("answers 503 (not 401) when the provider's keys cannot be fetched", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const deadUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}/jwks.json`;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const { app: unreachable } = createTestApp(bed.db.pool, { auth: jwksAuth(deadUrl) });
    const response = await unreachable.request(`/api/threads/${randomUUID()}/messages`, {
      headers: bearer(await providerToken(signingKey, "key-1")),
    });
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({ code: "auth_unavailable" });
  });
});

describe("API keys", () => {
  it("a key created with the CLI works until it is revoked; only a hash of its secret is stored", async () => {
    const created = await apiKeysCommand(["create", "--user", "billing-bot", "--name", "billing service"], bed.db.pool);
    const key = /^(tl_[0-9a-f]{16}_[A-Za-z0-9_-]{43})$/m.exec(created)![1]!;
    const id = key.slice(3, 19);
    const withKey = (token: string) =>
      call(app, ["POST", "/api/chat", { messageId: randomUUID(), content: "invoice ready" }], bearer(token));

    expect((await withKey(key)).status).toBe(202);
    expect(sent[0]!.data.userId).toBe("billing-bot");
    expect(await apiKeysCommand(["list", "--user", "billing-bot"], bed.db.pool)).toMatch(
      new RegExp(`^${id}  user=billing-bot  name="billing service"`),
    );
    const { rows } = await bed.db.pool.query("SELECT * FROM api_keys WHERE id = $1", [id]);
    expect(JSON.stringify(rows)).not.toContain(key.slice(20));

    const wrongSecret = `${key.slice(0, 20)}${"A".repeat(43)}`;
    for (const token of [wrongSecret, "tl_short", `tl_${"0".repeat(16)}_${key.slice(20)}`]) {
      const refused = await withKey(token);
      expect(refused.status, token).toBe(401);
      expect(((await refused.json()) as { error: string }).error).toMatch(/API key is unknown or revoked/);
    }

    expect(await apiKeysCommand(["revoke", id], bed.db.pool)).toMatch(/^Revoked: .* REVOKED /);
    const revoked = await withKey(key);
    expect(revoked.status).toBe(401);
    expect(revoked.headers.get("www-authenticate")).toMatch(/error="invalid_token"/);
    expect(sent).toHaveLength(1);
    expect(await apiKeysCommand(["list"], bed.db.pool)).toMatch(/REVOKED/);
  });

  it("the CLI refuses a create without a user or a name, and an unknown key id", async () => {
    await expect(apiKeysCommand(["create", "--name", "x"], bed.db.pool)).rejects.toThrow(/--user/);
    await expect(apiKeysCommand(["create", "--user", "u"], bed.db.pool)).rejects.toThrow(/--name/);
    await expect(apiKeysCommand(["revoke", "0000000000000000"], bed.db.pool)).rejects.toThrow(/No API key has the id/);
  });

  it("a server with only API keys refuses JWTs, saying what it accepts", async () => {
    const { app: keysOnly } = createTestApp(bed.db.pool, { auth: { dev: false } });
    const response = await call(
      keysOnly,
      ["GET", `/api/threads/${randomUUID()}/messages`, undefined],
      bearer(await tokenFor("carol")),
    );
    expect(response.status).toBe(401);
    expect(((await response.json()) as { error: string }).error).toMatch(/accepts only Threadline API keys/);
  });
});

describe("AUTH=dev", () => {
  it("takes the user from X-Threadline-User only when switched on", async () => {
    const { app: devApp, sent: devSent } = createTestApp(bed.db.pool, { auth: { ...testAuth, dev: true } });
    const route: [string, string, unknown] = ["POST", "/api/chat", { messageId: randomUUID(), content: "hi" }];
    expect((await call(devApp, route, { "x-threadline-user": "frank" })).status).toBe(202);
    expect(devSent[0]!.data.userId).toBe("frank");

    const missing = await call(devApp, route);
    expect(missing.status).toBe(401);
    expect(((await missing.json()) as { error: string }).error).toMatch(/X-Threadline-User: <user id> \(AUTH=dev\)/);
    expect((await call(devApp, route, { "x-threadline-user": "" })).status).toBe(401);
    // Real credentials still work beside the switch, and win over the header.
    expect(
      (await call(devApp, route, { ...bearer(await tokenFor("grace")), "x-threadline-user": "frank" })).status,
    ).toBe(202);
    expect(devSent[1]!.data.userId).toBe("grace");
    expect((await call(app, route, { "x-threadline-user": "frank" })).status).toBe(401);
    expect(devSent).toHaveLength(2);
  });

  /**
   * POST /api/chat written byte for byte on a socket, with `users` as X-Threadline-User headers
   * (each its bytes as given: curl sends what the terminal typed, UTF-8); its status and JSON body.
   */
  function chatAs(port: number, users: Buffer[]): Promise<{ status: number; body: { error?: string } }> {
    const body = JSON.stringify({ messageId: randomUUID(), content: "hi" });
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, "127.0.0.1");
      const received: Buffer[] = [];
      socket.on("data", (data: Buffer) => received.push(data));
      socket.on("error", reject);
      socket.on("end", () => {
        const [head = "", ...rest] = Buffer.concat(received).toString("utf8").split("\r\n\r\n");
        resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), body: JSON.parse(rest.join("\r\n\r\n")) });
      });
      const line = (text: string) => Buffer.from(`${text}\r\n`);
      socket.write(
        Buffer.concat([
          line("POST /api/chat HTTP/1.1"),
          line(`Host: 127.0.0.1:${port}`),
          line("Connection: close"),
          line("Content-Type: application/json"),
          line(`Content-Length: ${Buffer.byteLength(body)}`),
          ...users.map((user) => Buffer.concat([Buffer.from("X-Threadline-User: "), user, line("")])),
          line(""),
          Buffer.from(body),
        ]),
      );
    });
  }

  it("over real HTTP, reads X-Threadline-User as UTF-8: a user named in any script is that user", async () => {
    const { app: devApp, sent: devSent } = createTestApp(bed.db.pool, { auth: { ...testAuth, dev: true } });
    const server = await listen(devApp.fetch);
    try {
      for (const user of ["José", "Zoë Ångström", "山田太郎", "user-😀"]) {
        const answer = await chatAs(server.port, [Buffer.from(user, "utf8")]);
        expect(answer.status, user).toBe(202);
        expect(devSent.at(-1)!.data.userId, user).toBe(user);
      }
      // Bytes that are not UTF-8 are the characters fetch wrote (Latin-1): "José" as fetch sends it is José too.
      const latin1 = await chatAs(server.port, [Buffer.from("José", "latin1")]);
      expect(latin1.status).toBe(202);
      expect(devSent.at(-1)!.data.userId).toBe("José");
    } finally {
      await server.close();
    }
  });

  it("over real HTTP, refuses X-Threadline-User sent twice, saying to send it once; nothing is sent", async () => {
    const { app: devApp, sent: devSent } = createTestApp(bed.db.pool, { auth: { ...testAuth, dev: true } });
    const server = await listen(devApp.fetch);
    try {
      for (const users of [
        ["alice", "bob"],
        ["alice", "alice"],
      ]) {
        const twice = await chatAs(
          server.port,
          users.map((user) => Buffer.from(user)),
        );
        expect(twice.status, users.join()).toBe(401);
        expect(twice.body.error, users.join()).toMatch(/X-Threadline-User header was sent 2 times: send it once/);
      }
      expect(devSent).toEqual([]);
    } finally {
      await server.close();
    }
  });
});
