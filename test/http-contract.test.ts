import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_BODY_BYTES } from "../src/api/bounded-input.js";
import { requestApproval } from "../src/history/approvals.js";
import { beginTurn } from "../src/history/store.js";
import { seedBulkThread } from "./helpers/bulk-thread.js";
import { countRows } from "./helpers/fixtures.js";
import {
  createTestApp,
  headersFor,
  listen,
  testAuth,
  tokenFor,
  type Listening,
  type SentEvent,
} from "./helpers/http.js";
import {
  documentedOperations,
  expectDocumentedResponse,
  HTTP_METHODS,
  type OpenApiDocument,
} from "./helpers/openapi.js";
import { useTestBed } from "./helpers/test-bed.js";

/**
 * The API's edges over real HTTP, against a listening server, each answer checked against the
 * OpenAPI document the server serves: its status is one the operation documents, with the
 * documented content type and body. A client's mistake is a documented 4xx saying what to fix.
 */
const bed = useTestBed();

let server: Listening;
let sent: SentEvent[];
let spec: OpenApiDocument;
beforeAll(async () => {
  const test = createTestApp(bed.db.pool);
  sent = test.sent;
  server = await listen(test.app.fetch);
  spec = (await (await fetch(`${server.url}/openapi.json`)).json()) as OpenApiDocument;
});
afterAll(() => server.close());

/** Every documented API operation a client calls ("POST /api/chat"), with its path parameters filled by fresh UUIDs. */
const apiOperations = () =>
  documentedOperations(spec)
    .filter((operation) => operation.split(" ")[1]!.startsWith("/api/") && !operation.endsWith(" /api/inngest"))
    .map((operation) => {
      const [method, template] = operation.split(" ") as [string, string];
      return { operation, method, path: template.replace(/\{\w+\}/g, () => randomUUID()) };
    });

describe("methods", () => {
  /** The methods the document gives the path templates a concrete path matches (HEAD with GET, as Hono answers it). */
  const documentedMethods = (path: string) => {
    const methods = Object.entries(spec.paths)
      .filter(([template]) => new RegExp(`^${template.replace(/\{[^}]+\}/g, "[^/]+")}$`).test(path))
      .flatMap(([, item]) => Object.keys(item).filter((method) => HTTP_METHODS.includes(method)))
      .map((method) => method.toUpperCase());
    return [...new Set([...methods, ...(methods.includes("GET") ? ["HEAD"] : [])])].sort();
  };

  it("a method a path does not take is a 405 whose Allow lists the methods it takes, with or without credentials; an unknown path stays 404", async () => {
    const before = await countRows(bed.db.pool);
    const signedIn = await headersFor("user-1");
    const templates = [...new Set(documentedOperations(spec).map((operation) => operation.split(" ")[1]!))];
    expect(templates.length).toBeGreaterThan(30);
    let refused = 0;
    for (const template of templates) {
      const path = template.replace(/\{\w+\}/g, () => randomUUID());
      const allowed = documentedMethods(path);
      for (const method of ["GET", "POST", "PUT", "PATCH", "DELETE"].filter((method) => !allowed.includes(method)))
        for (const headers of [signedIn, {}]) {
          const response = await fetch(`${server.url}${path}`, { method, headers });
          const label = `${method} ${template} (${Object.keys(headers).length > 0 ? "signed in" : "anonymous"})`;
          expect(response.status, label).toBe(405);
          expect(response.headers.get("allow")?.split(", ").sort(), label).toEqual(allowed);
          expect(response.headers.get("content-type"), label).toMatch(/^application\/json/);
          expect(await response.json(), label).toEqual({
            error: expect.stringContaining(
              `${method} ${path} is not allowed: this path takes ${response.headers.get("allow")}`,
            ),
            code: "method_not_allowed",
          });
          refused++;
        }
    }
    expect(refused).toBeGreaterThan(100);
    for (const [method, path] of [
      ["GET", "/api/nothing"],
      ["PUT", "/api/nothing"],
      ["DELETE", `/api/threads/${randomUUID()}/nothing`],
      ["POST", "/nothing"],
    ] as const) {
      const response = await fetch(`${server.url}${path}`, { method, headers: signedIn });
      expect(response.status, `${method} ${path}`).toBe(404);
      expect(response.headers.get("allow"), `${method} ${path}`).toBeNull();
    }
    expect(sent).toEqual([]);
    expect(await countRows(bed.db.pool)).toEqual(before);
  });

  it("HEAD on a GET route answers as the GET does, without a body; a method a route takes is unaffected", async () => {
    const headers = await headersFor("user-1");
    for (const path of ["/api/threads", "/health", "/openapi.json"]) {
      const head = await fetch(`${server.url}${path}`, { method: "HEAD", headers });
      const get = await fetch(`${server.url}${path}`, { headers });
      expect(head.status, path).toBe(get.status);
      expect(head.headers.get("content-type"), path).toBe(get.headers.get("content-type"));
      expect(await head.text(), path).toBe("");
      await get.body?.cancel();
    }
    const anonymous = await fetch(`${server.url}/api/threads`, { method: "HEAD" });
    expect(anonymous.status).toBe(401);
  });
});

describe("request bodies", () => {
  it("every operation that may carry a body documents the 415 and 413 its body checks answer, and they write and send nothing", async () => {
    const before = await countRows(bed.db.pool);
    const headers = await headersFor("user-1");
    const bodied = apiOperations().filter(({ method }) => method !== "GET" && method !== "HEAD");
    expect(bodied.length).toBeGreaterThan(10);
    const statuses: string[] = [];
    for (const { method, path } of bodied) {
      const notJson = await fetch(`${server.url}${path}`, {
        method,
        headers: { ...headers, "content-type": "text/plain" },
        body: "{}",
      });
      statuses.push(await expectDocumentedResponse(spec, method, path, notJson));
      const tooLarge = await fetch(`${server.url}${path}`, {
        method,
        headers,
        body: JSON.stringify({ content: "x".repeat(MAX_BODY_BYTES) }),
      });
      statuses.push(await expectDocumentedResponse(spec, method, path, tooLarge));
    }
    expect(statuses.filter((status) => !/ (413|415)$/.test(status))).toEqual([]);
    expect(sent).toEqual([]);
    expect(await countRows(bed.db.pool)).toEqual(before);
  });
});

describe("nested JSON", () => {
  it("JSON nested 10,000 levels deep in a field that takes any JSON is a documented 400 naming the field, never a 500", async () => {
    const { threadId } = await seedBulkThread(bed.db.pool, { turns: 1, userId: "user-1" });
    const headers = await headersFor("user-1");
    const deep = `${"[".repeat(10_000)}${"]".repeat(10_000)}`;
    const tool = (input: string) => `{"type":"tool","id":"call_1","name":"roll_dice","input":${input}}`;
    const before = await countRows(bed.db.pool);
    const cases: [string, string, string, string][] = [
      ["POST", "/api/threads", `{"metadata":{"labels":${deep}}}`, "metadata"],
      ["PATCH", `/api/threads/${threadId}`, `{"metadata":{"labels":${deep}}}`, "metadata"],
      [
        "POST",
        "/api/chat",
        `{"messageId":"${randomUUID()}","content":"hi","conversation":[{"type":"tool_call","role":"assistant","tools":[${tool(`{"faces":${deep}}`)}],"stop_reason":"tool"}]}`,
        "conversation.0.tools.0.input",
      ],
      [
        "POST",
        "/api/chat",
        `{"messageId":"${randomUUID()}","content":"hi","conversation":[{"type":"tool_call","role":"assistant","tools":[${tool("{}")}],"stop_reason":"tool"},{"type":"tool_result","role":"tool_result","tool":${tool("{}")},"content":${deep},"stop_reason":"tool"}]}`,
        "conversation.1.content",
      ],
    ];
    for (const [method, path, body, field] of cases) {
      const response = await fetch(`${server.url}${path}`, { method, headers, body });
      const answer = response.clone();
      expect(await expectDocumentedResponse(spec, method, path, response), `${method} ${path}`).toMatch(/ 400$/);
      const { issues } = (await answer.json()) as { issues: { field: string; message: string }[] };
      expect(issues, `${method} ${path}`).toContainEqual({
        field,
        message: expect.stringMatching(/nested deeper than \d+ levels/),
      });
    }
    expect(sent).toEqual([]);
    expect(await countRows(bed.db.pool)).toEqual(before);
  });
});

describe("credentials", () => {
  it("every operation answers missing, malformed and refused credentials with its documented 401, and an address over the failure limit with its documented 429", async () => {
    const limited = createTestApp(bed.db.pool, { auth: { ...testAuth, failureLimit: { perMinute: 3 } } });
    const guarded = await listen(limited.app.fetch);
    try {
      const refused: Record<string, string>[] = [
        {},
        { authorization: "Basic dXNlcjpwYXNz" },
        { authorization: `Bearer ${await tokenFor("user-1", { secret: "another-secret-of-at-least-32-characters" })}` },
        { authorization: "Bearer tl_unknown_key" },
        { "x-threadline-user": "user-1" },
      ];
      const operations = apiOperations();
      for (const { method, path } of operations)
        for (const headers of refused) {
          const response = await fetch(`${server.url}${path}`, { method, headers });
          expect(await expectDocumentedResponse(spec, method, path, response)).toMatch(/ 401$/);
        }
      // Three refused tokens from this address spend its failures; then every route answers 429.
      for (let i = 0; i < 3; i++)
        expect((await fetch(`${guarded.url}/api/threads`, { headers: { authorization: "Bearer x.y.z" } })).status).toBe(
          401,
        );
      for (const { method, path } of operations) {
        const response = await fetch(`${guarded.url}${path}`, { method, headers: await headersFor("user-1") });
        expect(await expectDocumentedResponse(spec, method, path, response)).toMatch(/ 429$/);
      }
      expect(limited.sent).toEqual([]);
    } finally {
      await guarded.close();
    }
  });
});

describe("query strings", () => {
  /** The documented query parameters of every API operation read with GET. */
  const queried = () =>
    apiOperations().flatMap(({ operation, method, path }) =>
      method !== "GET"
        ? []
        : (spec.paths[operation.split(" ")[1]!]!.get!.parameters ?? [])
            .filter((parameter) => parameter.in === "query")
            .map((parameter) => ({ operation, path, name: parameter.name })),
    );

  it("every documented query parameter, given a value it cannot take, is a documented 400 naming it, never a 5xx", async () => {
    const { threadId } = await seedBulkThread(bed.db.pool, { turns: 2, userId: "user-1" });
    const headers = await headersFor("user-1");
    const values = [
      "",
      "abc",
      "-1",
      "0",
      "1.5",
      "1e3",
      " 5",
      "99999999999999999999",
      "\u0000",
      "😀",
      "x".repeat(2_000),
    ];
    const parameters = queried();
    expect(parameters.map(({ name }) => name)).toEqual(expect.arrayContaining(["limit", "cursor", "before", "after"]));
    for (const { path: template, name } of parameters) {
      // A real thread, so the parameters are read where a page exists.
      const path = template.replace(/[0-9a-f]{8}-[0-9a-f-]{27}/, threadId);
      for (const value of values) {
        const url = `${path}?${new URLSearchParams({ ...(name === "q" ? {} : { q: "question" }), [name]: value })}`;
        const response = await fetch(`${server.url}${url}`, {
          headers,
          signal: AbortSignal.timeout(10_000),
        });
        if (response.headers.get("content-type")?.startsWith("text/event-stream")) {
          await response.body?.cancel();
          continue;
        }
        const answer = response.clone();
        await expectDocumentedResponse(spec, "GET", url, response);
        expect(answer.status, `${url} -> ${answer.status}`).toBeLessThan(500);
        if (answer.status === 400) {
          const { issues } = (await answer.json()) as { issues: { field: string }[] };
          expect(
            issues.map((issue) => issue.field),
            url,
          ).toContain(name);
        }
      }
    }
  });

  it("a time outside the years 1 to 9999 (once in UTC) is a 400 naming the field, never a 500 or a body off the documented schema", async () => {
    const headers = await headersFor("user-1");
    const zeroId = "00000000-0000-0000-0000-000000000000";
    const cursorAt = (at: string) => Buffer.from(`${at}|${zeroId}`).toString("base64url");
    const cases: [string, string][] = [
      [`/api/threads?cursorTimestamp=0000-01-01T00:00:00Z&cursorId=${zeroId}`, "cursorTimestamp"],
      [`/api/threads?cursorTimestamp=0001-01-01T00:00:00%2B14:00&cursorId=${zeroId}`, "cursorTimestamp"],
      [`/api/threads?cursorTimestamp=9999-12-31T23:59:59-14:00&cursorId=${zeroId}`, "cursorTimestamp"],
      [`/api/threads?cursor=${cursorAt("0000-01-01T00:00:00.000Z")}`, "cursor"],
      ["/api/usage?from=0000-01-01T00:00:00%2B14:00", "from"],
      ["/api/usage?from=2020-01-01&to=9999-12-31T23:59:59-14:00", "to"],
    ];
    for (const [url, field] of cases) {
      const response = await fetch(`${server.url}${url}`, { headers });
      const answer = response.clone();
      expect(await expectDocumentedResponse(spec, "GET", url, response), url).toMatch(/ 400$/);
      const { issues } = (await answer.json()) as { issues: { field: string }[] };
      expect(
        issues.map((issue) => issue.field),
        url,
      ).toContain(field);
    }
    // The extremes themselves are times like any other.
    for (const url of [
      `/api/threads?cursorTimestamp=0001-01-01T00:00:00Z&cursorId=${zeroId}`,
      `/api/threads?cursorTimestamp=9999-12-31T23:59:59.999Z&cursorId=${zeroId}`,
      "/api/usage?from=0001-01-01&to=9999-12-31T23:59:59Z",
    ]) {
      const response = await fetch(`${server.url}${url}`, { headers });
      expect(await expectDocumentedResponse(spec, "GET", url, response), url).toMatch(/ 200$/);
    }
  });
});

describe("another user's thread", () => {
  it("every operation on it answers exactly as on a thread that does not exist (status and body), and changes nothing", async () => {
    // Bob's answered thread, and Bob's thread whose turn runs and waits on an approval.
    const answered = (await seedBulkThread(bed.db.pool, { turns: 2, userId: "bob" })).threadId;
    const [question, answer] = (
      await bed.db.pool.query<{ id: string }>("SELECT id FROM messages WHERE thread_id = $1 ORDER BY seq", [answered])
    ).rows.map((row) => row.id);
    const running = randomUUID();
    await beginTurn(bed.db.pool, {
      threadId: running,
      userId: "bob",
      message: { id: running, text: "Roll a die" },
      turn: { runId: `run-${running}`, kind: "chat" },
    });
    const approval = (await requestApproval(bed.db.pool, {
      approvalId: randomUUID(),
      runId: `run-${running}`,
      toolCallId: "call_dice",
      toolName: "roll_dice",
      arguments: { count: 1, sides: 6 },
      expiresInSeconds: 3600,
    }))!.approvalId;
    const bodies: Record<string, unknown> = {
      "PATCH /api/threads/{threadId}": { title: "Mine now" },
      "PUT /api/threads/{threadId}/messages/{answerId}/feedback": { rating: "down" },
      "POST /api/threads/{threadId}/approvals/{approvalId}": { decision: "approve" },
      "POST /api/threads/{threadId}/messages/{messageId}/edit": { messageId: randomUUID(), content: "Edited" },
    };
    const alice = await headersFor("alice");
    const before = { rows: await countRows(bed.db.pool), sent: sent.length };
    const threadOperations = documentedOperations(spec).filter((operation) => operation.includes("{threadId}"));
    expect(threadOperations.length).toBeGreaterThan(15);
    const answerOf = async (method: string, path: string, body: unknown) => {
      const response = await fetch(`${server.url}${path}`, {
        method,
        headers: alice,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = response.headers.get("content-type")?.startsWith("text/event-stream")
        ? (await response.body?.cancel(), "(an event stream)")
        : await response.text();
      return { status: response.status, text };
    };
    for (const operation of threadOperations) {
      const [method, template] = operation.split(" ") as [string, string];
      const threadId = /approvals|stop/.test(template) ? running : answered;
      const path = (thread: string) =>
        template
          .replace("{threadId}", thread)
          .replace("{messageId}", question!)
          .replace("{answerId}", answer!)
          .replace("{approvalId}", approval);
      const body = bodies[operation] ?? (method === "GET" || method === "DELETE" ? undefined : {});
      const bobs = await answerOf(method, path(threadId), body);
      const unknown = await answerOf(method, path(randomUUID()), body);
      expect(bobs, operation).toEqual(unknown);
      expect(bobs.status, operation).toBeGreaterThanOrEqual(200);
    }
    // Threads named in a body: a message, useChat's id, a thread to create.
    for (const [path, body] of [
      ["/api/threads", (id: string) => ({ id, title: "Mine now" })],
      [
        "/api/ui/chat",
        (id: string) => ({
          id,
          trigger: "submit-message",
          messages: [{ id: randomUUID(), role: "user", parts: [{ type: "text", text: "hi" }] }],
        }),
      ],
      ["/api/chat", (threadId: string) => ({ threadId, messageId: randomUUID(), content: "hi" })],
    ] as const) {
      const bobs = await answerOf("POST", path, body(answered));
      expect(bobs.status, `${path} ${bobs.text}`).toBe(404);
      expect(JSON.parse(bobs.text), path).toEqual({
        error: "Thread not found: no thread with this id belongs to you.",
        code: "thread_not_found",
      });
    }
    expect(await countRows(bed.db.pool)).toEqual(before.rows);
    expect(sent.length).toBe(before.sent);
  });
});

describe("any body", () => {
  /** Odd strings: empty, blank, NUL, a lone surrogate, an emoji, long ones, and the words the routes take. */
  const odd = fc.oneof(
    fc.string({ maxLength: 20 }),
    fc.constantFrom("", " ", "\u0000", "\ud800", "😀", "x".repeat(5_000), "y".repeat(60_000)),
    fc.constantFrom(
      "up",
      "down",
      "approve",
      "deny",
      "submit-message",
      "regenerate-message",
      "user",
      "assistant",
      "text",
    ),
  );
  /** Stands for the caller's thread, its question or its answer; else a random UUID or an odd string. */
  const idOrOdd = fc.oneof(fc.constantFrom("thread", "question", "answer"), fc.uuid(), odd);
  const anyJson: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
    value: fc.oneof(
      { depthSize: "small" },
      odd,
      idOrOdd,
      fc.integer(),
      fc.double(),
      fc.boolean(),
      fc.constant(null),
      fc.array(tie("value"), { maxLength: 3 }),
      fc.dictionary(odd, tie("value"), { maxKeys: 4 }),
    ),
  })).value;
  const fields = (shape: Record<string, fc.Arbitrary<unknown>>) =>
    fc.oneof(
      { arbitrary: fc.record({ ...shape, extra: anyJson }, { requiredKeys: [] }), weight: 5 },
      { arbitrary: anyJson, weight: 1 },
    );
  const uiMessage = fc.record({
    id: idOrOdd,
    role: fc.oneof(fc.constantFrom("user", "assistant"), odd),
    parts: fc.oneof(
      fc.array(fc.record({ type: fc.oneof(fc.constant("text"), odd), text: anyJson }), { maxLength: 2 }),
      anyJson,
    ),
  });
  const bodies: Record<string, fc.Arbitrary<unknown>> = {
    "POST /api/ui/chat": fields({
      id: idOrOdd,
      messages: fc.oneof(fc.array(uiMessage, { maxLength: 2 }), anyJson),
      trigger: fc.oneof(fc.constantFrom("submit-message", "regenerate-message"), odd),
      messageId: idOrOdd,
    }),
    "POST /api/threads": fields({ id: idOrOdd, title: anyJson, metadata: anyJson }),
    "PATCH /api/threads/{threadId}": fields({ title: anyJson, metadata: anyJson }),
    "PUT /api/threads/{threadId}/messages/{answerId}/feedback": fields({ rating: anyJson, comment: anyJson }),
    "POST /api/threads/{threadId}/approvals/{approvalId}": fields({ decision: anyJson, reason: anyJson }),
    "POST /api/threads/{threadId}/messages/{messageId}/edit": fields({ messageId: idOrOdd, content: anyJson }),
    "POST /api/threads/{threadId}/stop": fields({ messageId: idOrOdd }),
    "POST /api/realtime/token": fields({ threadId: idOrOdd }),
  };

  it("to the routes that take one is a documented answer (its status, content type and body), never a 5xx", async () => {
    const { threadId } = await seedBulkThread(bed.db.pool, { turns: 2, userId: "user-1" });
    const [question, answer] = (
      await bed.db.pool.query<{ id: string }>("SELECT id FROM messages WHERE thread_id = $1 ORDER BY seq", [threadId])
    ).rows.map((row) => row.id);
    const real: Record<string, string> = { thread: threadId, question: question!, answer: answer! };
    const resolved = (value: unknown): unknown =>
      typeof value === "string"
        ? (real[value] ?? value)
        : Array.isArray(value)
          ? value.map(resolved)
          : value !== null && typeof value === "object"
            ? Object.fromEntries(Object.entries(value).map(([key, item]) => [key, resolved(item)]))
            : value;
    const headers = await headersFor("user-1");
    for (const [operation, body] of Object.entries(bodies)) {
      const [method, template] = operation.split(" ") as [string, string];
      await fc.assert(
        fc.asyncProperty(body, fc.constantFrom("thread", "random"), async (sentBody, thread) => {
          const path = template
            .replace("{threadId}", thread === "thread" ? threadId : randomUUID())
            .replace("{messageId}", question!)
            .replace("{answerId}", answer!)
            .replace("{approvalId}", randomUUID());
          const response = await fetch(`${server.url}${path}`, {
            method,
            headers,
            body: JSON.stringify(resolved(sentBody)),
          });
          if (response.headers.get("content-type")?.startsWith("text/event-stream")) await response.body?.cancel();
          else await expectDocumentedResponse(spec, method, path, response);
          expect(response.status, operation).toBeLessThan(500);
        }),
        { numRuns: 60 },
      );
    }
  });
});
