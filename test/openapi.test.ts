import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REFERENCE_ASSETS } from "../src/api/openapi.js";
import { PLAYGROUND_FILES } from "../src/api/playground.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { requestApproval } from "../src/history/approvals.js";
import { beginTurn } from "../src/history/store.js";
import { remember } from "../src/history/memories.js";
import { setUserBudget } from "../src/history/usage.js";
import type { RealtimePublisher } from "../src/stream/realtime-publisher.js";
import { createEventNotifier, type EventNotifier } from "../src/stream/notifier.js";
import { execute } from "./helpers/engine.js";
import { conversation, scriptedModel } from "./helpers/fixtures.js";
import { asUser, createTestApp, headersFor, testAuth, type SentEvent } from "./helpers/http.js";
import {
  documentedOperations,
  documentedSchema,
  expectDocumentedResponse,
  HTTP_METHODS,
  operationFor,
  servedRoutes,
  type OpenApiDocument,
} from "./helpers/openapi.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

let app: ReturnType<typeof createTestApp>["app"];
let sent: SentEvent[];
let spec: OpenApiDocument;
/** A database that refuses every connection: the server's faults (500, 503) are real ones. */
const unreachableDatabase = new pg.Pool({
  connectionString: "postgres://postgres@127.0.0.1:1/none",
  connectionTimeoutMillis: 2_000,
});

/**
 * user-1's thread of two turns whose first answer was regenerated: two variants, the second turn off
 * the path; an empty thread of user-1's that the delete case removes; a thread of user-1's whose turn
 * is running (useChat's resume streams it) and another one (the stop case stops it); and a memory of user-1's.
 */
const thread = {
  threadId: "",
  first: "",
  offPath: "",
  answer: "",
  disposable: "",
  memory: "",
  running: "",
  stoppable: "",
  approval: "",
};

/** Inngest realtime stand-in: tokens for whoever asks. */
const fakeRealtime: RealtimePublisher = {
  publish: async () => undefined,
  subscriptionToken: async (userId) => ({ key: "token", channel: `user:${userId}`, topics: ["agent_stream"] }),
};

const uiMessage = (text: string) => ({ id: randomUUID(), role: "user", parts: [{ type: "text", text }] });

beforeAll(async () => {
  ({ app, sent } = createTestApp(bed.db.pool));
  const response = await app.request("/openapi.json");
  expect(response.status).toBe(200);
  spec = (await response.json()) as OpenApiDocument;

  const model = scriptedModel(bed.model);
  const { threadId, messageIds } = await conversation(createChatTurn({ db: bed.db.pool, model }), bed.model, [
    ["Say hi", "Hi"],
    ["And again", "Again"],
  ]);
  expect(
    (await asUser(app, "user-1").post(`/api/threads/${threadId}/messages/${messageIds[0]}/regenerate`, {})).status,
  ).toBe(202);
  bed.model.script({ text: "Hello there" });
  expect((await execute(createRegenerate({ db: bed.db.pool, model }), sent.pop()!)).error).toBeUndefined();
  const page = (await (await asUser(app, "user-1").get(`/api/threads/${threadId}/messages`)).json()) as {
    messages: { id: string; role: string }[];
  };
  const disposable = (await (await asUser(app, "user-1").post("/api/threads", { title: "To delete" })).json()) as {
    id: string;
  };
  const stoppable = randomUUID();
  await beginTurn(bed.db.pool, {
    threadId: stoppable,
    userId: "user-1",
    message: { id: stoppable, text: "Still answering" },
    turn: { runId: `run-${stoppable}`, kind: "chat" },
  });
  const memory = await remember(bed.db.pool, { userId: "user-1", threadId: stoppable, text: "Prefers metric units." });
  if (memory.status !== "remembered") throw new Error("user-1's memory was not stored");
  // A thread whose turn has started and not finished: what useChat's resume streams.
  const running = randomUUID();
  await beginTurn(bed.db.pool, {
    threadId: running,
    userId: "user-1",
    message: { id: running, text: "Still thinking?" },
    turn: { runId: `run-${running}`, kind: "chat" },
  });
  // A tool call of that turn awaiting approval.
  const approval = await requestApproval(bed.db.pool, {
    approvalId: randomUUID(),
    runId: `run-${running}`,
    toolCallId: "call_dice",
    toolName: "roll_dice",
    arguments: { count: 1, sides: 6 },
    expiresInSeconds: 3600,
  });
  Object.assign(thread, {
    approval: approval!.approvalId,
    threadId,
    first: messageIds[0]!,
    offPath: messageIds[1]!,
    answer: page.messages.find((m) => m.role === "assistant")!.id,
    disposable: disposable.id,
    memory: memory.id,
    running,
    stoppable,
  });
});
/** An app with its own LISTEN connection for the event stream case, closed after the file. */
let streaming: { app: ReturnType<typeof createTestApp>["app"]; events: EventNotifier };
beforeAll(() => {
  const events = createEventNotifier(bed.db.pool);
  streaming = { app: createTestApp(bed.db.pool, { events }).app, events };
});
afterAll(async () => {
  await streaming.events.close();
  await unreachableDatabase.end();
});

/** Opens the endless event stream, keeps its status and headers, and disconnects. */
async function openedStream(path: string, init: RequestInit = {}) {
  const controller = new AbortController();
  const response = await streaming.app.request(path, {
    headers: await headersFor("user-1"),
    ...init,
    signal: controller.signal,
  });
  controller.abort();
  await response.body?.cancel();
  return new Response("", { status: response.status, headers: response.headers });
}

describe("the OpenAPI document", () => {
  it("is an OpenAPI 3.1 document: info, paths, operations with responses, and every reference and security scheme it names exists", () => {
    expect(spec.openapi).toMatch(/^3\.1\.\d+$/);
    expect(spec.info).toMatchObject({
      title: "Threadline",
      version: JSON.parse(readFileSync("package.json", "utf8")).version,
    });
    expect(Object.keys(spec.paths).length).toBeGreaterThan(0);

    const json = JSON.stringify(spec);
    const references = [...json.matchAll(/"\$ref":"([^"]+)"/g)].map((match) => match[1]!);
    expect(references.length).toBeGreaterThan(0);
    for (const reference of new Set(references)) {
      const [, section, name] = /^#\/components\/(\w+)\/(.+)$/.exec(reference) ?? [];
      expect(
        (spec.components as Record<string, Record<string, unknown> | undefined>)[section!]?.[name!],
        reference,
      ).toBeDefined();
    }

    const schemes = Object.keys(spec.components.securitySchemes ?? {});
    expect(schemes).toEqual(["jwt", "apiKey", "devUser"]);
    const operationIds: string[] = [];
    for (const [path, item] of Object.entries(spec.paths)) {
      const inTemplate = [...path.matchAll(/\{(\w+)\}/g)].map((match) => match[1]).sort();
      for (const [method, operation] of Object.entries(item)) {
        const where = `${method.toUpperCase()} ${path}`;
        expect(HTTP_METHODS, where).toContain(method);
        operationIds.push(operation.operationId!);
        expect(operation.summary, where).toBeTruthy();
        for (const requirement of [...(spec.security ?? []), ...(operation.security ?? [])])
          expect(schemes).toEqual(expect.arrayContaining(Object.keys(requirement)));
        const pathParameters = (operation.parameters ?? []).filter((parameter) => parameter.in === "path");
        expect(pathParameters.map((parameter) => parameter.name).sort(), where).toEqual(inTemplate);
        expect(
          pathParameters.every((parameter) => parameter.required === true),
          where,
        ).toBe(true);
        expect(
          Object.keys(operation.responses).some((status) => status.startsWith("2") || status === "default"),
          `${where}: a success answer`,
        ).toBe(true);
        // Whatever is validated can be refused with 400.
        const validated = (operation.parameters ?? []).length > 0 || "requestBody" in operation;
        if (validated) expect(Object.keys(operation.responses), `${where}: its 400`).toContain("400");
        for (const [status, response] of Object.entries(operation.responses)) {
          expect(status, where).toMatch(/^([1-5]\d\d|default)$/);
          expect(response.description, `${where} ${status}`).toBeTruthy();
        }
      }
    }
    expect(new Set(operationIds).size).toBe(operationIds.length);

    // A required key the schema does not describe (zod's exhaustive z.record over an enum) is a
    // promise the answers do not keep, and one the body checks below cannot see.
    const undescribedRequired = (node: unknown): string[] =>
      node === null || typeof node !== "object"
        ? []
        : [
            ...(Array.isArray((node as { required?: unknown }).required) && !("properties" in node)
              ? [JSON.stringify(node).slice(0, 120)]
              : []),
            ...Object.values(node).flatMap(undescribedRequired),
          ];
    expect(undescribedRequired(spec)).toEqual([]);
  });

  it("documents every route the app serves, and only those", () => {
    expect(documentedOperations(spec).sort()).toEqual(servedRoutes(app).sort());
    // Only middleware is registered for every method: a route served for any method must be documented too.
    expect(app.routes.filter((route) => route.method === "ALL" && !route.path.endsWith("*"))).toEqual([]);
  });

  it("would miss a route added without documentation, which the comparison catches", async () => {
    const { app: extended } = createTestApp(bed.db.pool);
    extended.get("/api/undocumented", (c) => c.json({}));
    const document = (await (await extended.request("/openapi.json")).json()) as OpenApiDocument;
    const missing = servedRoutes(extended).filter((route) => !documentedOperations(document).includes(route));
    expect(missing).toEqual(["GET /api/undocumented"]);
  });

  it("asks for credentials on every API route (JWT, API key, or the dev header under AUTH=dev only) and documents their 401; the rest are public", () => {
    expect(spec.security).toEqual([{ jwt: [] }, { apiKey: [] }, { devUser: [] }]);
    expect(JSON.stringify(spec.components.securitySchemes)).toContain("AUTH=dev");
    for (const [path, item] of Object.entries(spec.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        const authenticated = path.startsWith("/api/") && path !== "/api/inngest";
        expect(operation.security, `${method} ${path}`).toEqual(authenticated ? undefined : []);
        if (authenticated) expect(Object.keys(operation.responses), `${method} ${path}`).toContain("401");
      }
    }
  });

  it("documents every turn status the database can hold, but skipped (never shown), and the messages page's retrying and awaiting_approval", async () => {
    const { rows } = await bed.db.pool.query<{ def: string }>(
      "SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = 'turns_status_check'",
    );
    const shown = [...rows[0]!.def.matchAll(/'(\w+)'/g)]
      .map((match) => match[1]!)
      .filter((status) => status !== "skipped");
    const documented = [...JSON.stringify(spec).matchAll(/"enum":(\[[^\]]*"running"[^\]]*\])/g)].map((match) =>
      (JSON.parse(match[1]!) as string[]).sort(),
    );
    expect(documented.sort((a, b) => a.length - b.length)).toEqual([
      [...shown].sort(),
      [...shown, "retrying", "awaiting_approval"].sort(),
    ]);
  });

  it("renders the document on /docs from this origin only: no CDN, no inline script, a CSP that says so", async () => {
    const response = await app.request("/docs");
    expect(response.headers.get("content-security-policy")).toContain("script-src 'self';");
    const page = await response.text();
    const sources = [...page.matchAll(/<(?:script|link)\b[^>]*\b(?:src|href)="([^"]+)"/g)].map((match) => match[1]);
    expect(sources).toEqual(["docs/swagger-ui.css", "docs/swagger-ui-bundle.js", "docs/reference.js"]);
    expect(page).not.toMatch(/<script>/);
    for (const { path } of REFERENCE_ASSETS) {
      const asset = await app.request(path);
      expect(asset.status, path).toBe(200);
      expect((await asset.text()).length, path).toBeGreaterThan(path.endsWith("reference.js") ? 50 : 100_000);
    }
    expect(await (await app.request("/docs/reference.js")).text()).toContain('"openapi.json"');
  });

  it("documents the requests from the validation schemas: parameters, query and body", () => {
    const messages = operationFor(spec, "GET", "/api/threads/t/messages").operation;
    expect(
      messages.parameters?.map((parameter) => [parameter.in, parameter.name, parameter.required ?? false]),
    ).toEqual([
      ["path", "threadId", true],
      ["query", "limit", false],
      ["query", "before", false],
      ["query", "after", false],
    ]);
    const chat = operationFor(spec, "POST", "/api/chat").operation as {
      requestBody?: { content: Record<string, { schema: unknown }> };
    };
    const body = documentedSchema(spec, chat.requestBody!.content["application/json"]!.schema);
    expect(body.safeParse({ messageId: randomUUID(), content: "Hello" }).success).toBe(true);
    expect(body.safeParse({ content: "Hello" }).success).toBe(false);
    expect(body.safeParse({ messageId: randomUUID(), content: "Hello", userId: "someone-else" }).success).toBe(false);
  });
});

const json = (body: unknown) => JSON.stringify(body);
const authenticated = async (method: string, path: string, body?: string, target = app) =>
  target.request(path, { method, headers: await headersFor("user-1"), ...(body === undefined ? {} : { body }) });
const messagesOf = (threadId: string) => `/api/threads/${threadId}/messages`;

/**
 * Real requests, each answered by the app as it is, and the status each is expected to get. Every
 * response must be one its route documents (status, required headers, body against the document's
 * schema). Add a case for every route you document.
 */
const cases: {
  name: string;
  method: string;
  path: () => string;
  status: number;
  send: (path: string, method: string) => Promise<Response> | Response;
}[] = [
  {
    name: "a chat message",
    method: "POST",
    path: () => "/api/chat",
    status: 202,
    send: (p, m) => authenticated(m, p, json({ messageId: randomUUID(), content: "Hello" })),
  },
  {
    name: "a chat message over the caller's usage budget",
    method: "POST",
    path: () => "/api/chat",
    status: 429,
    send: async (p) => {
      // A limit of 0 tokens a day: nothing more may be sent today.
      await setUserBudget(bed.db.pool, "over-budget", { dailyTokens: 0 });
      return asUser(app, "over-budget").post(p, { messageId: randomUUID(), content: "Hello" });
    },
  },
  {
    name: "a chat message without content",
    method: "POST",
    path: () => "/api/chat",
    status: 400,
    send: (p, m) => authenticated(m, p, json({ messageId: randomUUID() })),
  },
  {
    name: "a chat message to another user's thread",
    method: "POST",
    path: () => "/api/chat",
    status: 404,
    send: (p) => asUser(app, "user-2").post(p, { messageId: randomUUID(), threadId: thread.threadId, content: "Hi" }),
  },
  {
    name: "a chat message without credentials",
    method: "POST",
    path: () => "/api/chat",
    status: 401,
    send: (p, m) => app.request(p, { method: m, body: json({ messageId: randomUUID(), content: "Hi" }) }),
  },
  {
    name: "a chat message that is not JSON",
    method: "POST",
    path: () => "/api/chat",
    status: 415,
    send: async (p, m) =>
      app.request(p, {
        method: m,
        headers: { ...(await headersFor("user-1")), "content-type": "text/plain" },
        body: "Hello",
      }),
  },
  {
    name: "a chat message over the body limit",
    method: "POST",
    path: () => "/api/chat",
    status: 413,
    send: (p, m) => authenticated(m, p, json({ messageId: randomUUID(), content: "x".repeat(300_000) })),
  },
  {
    name: "a chat message while Inngest is unreachable",
    method: "POST",
    path: () => "/api/chat",
    status: 503,
    send: (p, m) =>
      authenticated(
        m,
        p,
        json({ messageId: randomUUID(), content: "Hi" }),
        createTestApp(bed.db.pool, { sendEvent: () => Promise.reject(new Error("ECONNREFUSED")) }).app,
      ),
  },
  {
    name: "a chat message while the identity provider's keys are unreachable",
    method: "POST",
    path: () => "/api/chat",
    status: 503,
    send: (p, m) =>
      authenticated(
        m,
        p,
        json({ messageId: randomUUID(), content: "Hi" }),
        createTestApp(bed.db.pool, {
          auth: { ...testAuth, jwt: { ...testAuth.jwt!, key: { jwksUrl: "http://127.0.0.1:1/jwks.json" } } },
        }).app,
      ),
  },
  {
    // Before the page of messages, so the page shows an answer's feedback.
    name: "feedback on an answer",
    method: "PUT",
    path: () => `${messagesOf(thread.threadId)}/${thread.answer}/feedback`,
    status: 200,
    send: (p, m) => authenticated(m, p, json({ rating: "up", comment: "clear" })),
  },
  {
    name: "a page of messages",
    method: "GET",
    path: () => messagesOf(thread.threadId),
    status: 200,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "a page of messages with a bad limit",
    method: "GET",
    path: () => `${messagesOf(thread.threadId)}?limit=0`,
    status: 400,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "another user's messages",
    method: "GET",
    path: () => messagesOf(thread.threadId),
    status: 404,
    send: (p) => asUser(app, "user-2").get(p),
  },
  {
    name: "messages while the database is unreachable",
    method: "GET",
    path: () => messagesOf(thread.threadId),
    status: 500,
    send: (p, m) => authenticated(m, p, undefined, createTestApp(unreachableDatabase).app),
  },
  {
    name: "a message's answer variants",
    method: "GET",
    path: () => `${messagesOf(thread.threadId)}/${thread.first}/variants`,
    status: 200,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "variants of an unknown message",
    method: "GET",
    path: () => `${messagesOf(thread.threadId)}/${randomUUID()}/variants`,
    status: 404,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "variants of an answer",
    method: "GET",
    path: () => `${messagesOf(thread.threadId)}/${thread.answer}/variants`,
    status: 422,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "feedback with a bad rating",
    method: "PUT",
    path: () => `${messagesOf(thread.threadId)}/${thread.answer}/feedback`,
    status: 400,
    send: (p, m) => authenticated(m, p, json({ rating: "sideways" })),
  },
  {
    name: "feedback on a user message",
    method: "PUT",
    path: () => `${messagesOf(thread.threadId)}/${thread.first}/feedback`,
    status: 422,
    send: (p, m) => authenticated(m, p, json({ rating: "down" })),
  },
  {
    name: "feedback on another user's answer",
    method: "PUT",
    path: () => `${messagesOf(thread.threadId)}/${thread.answer}/feedback`,
    status: 404,
    send: async (p) =>
      app.request(p, { method: "PUT", headers: await headersFor("user-2"), body: json({ rating: "down" }) }),
  },
  {
    name: "an answer's feedback removed",
    method: "DELETE",
    path: () => `${messagesOf(thread.threadId)}/${thread.answer}/feedback`,
    status: 200,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "a thread's debug view",
    method: "GET",
    path: () => `/api/threads/${thread.threadId}/debug`,
    status: 200,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "a regenerate",
    method: "POST",
    path: () => `${messagesOf(thread.threadId)}/${thread.first}/regenerate`,
    status: 202,
    send: (p, m) => authenticated(m, p, json({ reason: "retry" })),
  },
  {
    name: "a regenerate off the current path",
    method: "POST",
    path: () => `${messagesOf(thread.threadId)}/${thread.offPath}/regenerate`,
    status: 409,
    send: (p, m) => authenticated(m, p, json({})),
  },
  {
    name: "a regenerate of an answer",
    method: "POST",
    path: () => `${messagesOf(thread.threadId)}/${thread.answer}/regenerate`,
    status: 422,
    send: (p, m) => authenticated(m, p, json({})),
  },
  {
    name: "a stop of a running turn",
    method: "POST",
    path: () => `/api/threads/${thread.stoppable}/stop`,
    status: 202,
    send: (p, m) => authenticated(m, p, json({})),
  },
  {
    name: "a stop with nothing running",
    method: "POST",
    path: () => `/api/threads/${thread.threadId}/stop`,
    status: 409,
    send: (p, m) => authenticated(m, p, json({})),
  },
  {
    name: "another user's stop",
    method: "POST",
    path: () => `/api/threads/${thread.stoppable}/stop`,
    status: 404,
    send: (p) => asUser(app, "user-2").post(p, {}),
  },
  {
    name: "a stop naming a bad message id",
    method: "POST",
    path: () => `/api/threads/${thread.stoppable}/stop`,
    status: 400,
    send: (p, m) => authenticated(m, p, json({ messageId: "m-1" })),
  },
  {
    name: "the thread's pending approvals",
    method: "GET",
    path: () => `/api/threads/${thread.running}/approvals?status=pending`,
    status: 200,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "another user's approval",
    method: "POST",
    path: () => `/api/threads/${thread.running}/approvals/${thread.approval}`,
    status: 404,
    send: (p) => asUser(app, "user-2").post(p, { decision: "approve" }),
  },
  {
    name: "an approval decided neither way",
    method: "POST",
    path: () => `/api/threads/${thread.running}/approvals/${thread.approval}`,
    status: 400,
    send: (p, m) => authenticated(m, p, json({ decision: "maybe" })),
  },
  {
    name: "an approval",
    method: "POST",
    path: () => `/api/threads/${thread.running}/approvals/${thread.approval}`,
    status: 200,
    send: (p, m) => authenticated(m, p, json({ decision: "approve" })),
  },
  {
    name: "an approval decided before",
    method: "POST",
    path: () => `/api/threads/${thread.running}/approvals/${thread.approval}`,
    status: 409,
    send: (p, m) => authenticated(m, p, json({ decision: "deny" })),
  },
  {
    name: "the caller's threads",
    method: "GET",
    path: () => "/api/threads",
    status: 200,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "the caller's threads with a bad limit",
    method: "GET",
    path: () => "/api/threads?limit=0",
    status: 400,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "a new thread",
    method: "POST",
    path: () => "/api/threads",
    status: 201,
    send: (p, m) => authenticated(m, p, json({ title: "Plans" })),
  },
  {
    name: "a thread the caller already holds",
    method: "POST",
    path: () => "/api/threads",
    status: 200,
    send: (p, m) => authenticated(m, p, json({ id: thread.threadId })),
  },
  {
    name: "a thread with metadata over its limit",
    method: "POST",
    path: () => "/api/threads",
    status: 413,
    send: (p, m) => authenticated(m, p, json({ metadata: { note: "x".repeat(5_000) } })),
  },
  {
    name: "one thread",
    method: "GET",
    path: () => `/api/threads/${thread.threadId}`,
    status: 200,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "another user's thread",
    method: "GET",
    path: () => `/api/threads/${thread.threadId}`,
    status: 404,
    send: (p) => asUser(app, "user-2").get(p),
  },
  {
    name: "a renamed thread",
    method: "PATCH",
    path: () => `/api/threads/${thread.threadId}`,
    status: 200,
    send: (p, m) => authenticated(m, p, json({ title: "Renamed" })),
  },
  {
    name: "a deleted thread",
    method: "DELETE",
    path: () => `/api/threads/${thread.disposable}`,
    status: 200,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "a thread's event stream",
    method: "GET",
    path: () => `/api/threads/${thread.threadId}/events?after=0`,
    status: 200,
    send: (p) => openedStream(p),
  },
  {
    name: "another user's event stream",
    method: "GET",
    path: () => `/api/threads/${thread.threadId}/events`,
    status: 404,
    send: (p) => asUser(app, "user-2").get(p),
  },
  {
    name: "an event stream after a bad id",
    method: "GET",
    path: () => `/api/threads/${thread.threadId}/events?after=x`,
    status: 400,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "a useChat message",
    method: "POST",
    path: () => "/api/ui/chat",
    status: 200,
    send: (p, m) =>
      openedStream(p, {
        method: m,
        body: json({ id: randomUUID(), messages: [uiMessage("Hello")], trigger: "submit-message" }),
      }),
  },
  {
    name: "a useChat message to another user's thread",
    method: "POST",
    path: () => "/api/ui/chat",
    status: 404,
    send: (p) =>
      asUser(app, "user-2").post(p, { id: thread.threadId, messages: [uiMessage("Hi")], trigger: "submit-message" }),
  },
  {
    name: "a useChat message with a chat id that is not a UUID",
    method: "POST",
    path: () => "/api/ui/chat",
    status: 400,
    send: (p, m) => authenticated(m, p, json({ id: "chat-1", messages: [uiMessage("Hi")], trigger: "submit-message" })),
  },
  {
    name: "useChat's resume while a turn runs",
    method: "GET",
    path: () => `/api/ui/chat/${thread.running}/stream`,
    status: 200,
    send: (p) => openedStream(p),
  },
  {
    name: "useChat's resume with nothing running",
    method: "GET",
    path: () => `/api/ui/chat/${thread.threadId}/stream`,
    status: 204,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "useChat's resume of a thread id that is not a UUID",
    method: "GET",
    path: () => "/api/ui/chat/chat-1/stream",
    status: 400,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "a realtime token",
    method: "POST",
    path: () => "/api/realtime/token",
    status: 200,
    send: (p, m) => authenticated(m, p, json({}), createTestApp(bed.db.pool, { realtime: fakeRealtime }).app),
  },
  {
    name: "a realtime token while realtime is off",
    method: "POST",
    path: () => "/api/realtime/token",
    status: 404,
    send: (p, m) => authenticated(m, p, json({})),
  },
  {
    name: "a realtime token while Inngest is unreachable",
    method: "POST",
    path: () => "/api/realtime/token",
    status: 503,
    send: (p, m) =>
      authenticated(
        m,
        p,
        json({}),
        createTestApp(bed.db.pool, {
          realtime: { ...fakeRealtime, subscriptionToken: () => Promise.reject(new Error("ECONNREFUSED")) },
        }).app,
      ),
  },
  {
    name: "the caller's export",
    method: "GET",
    path: () => "/api/export",
    status: 200,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "a search",
    method: "GET",
    path: () => "/api/search?q=hello",
    status: 200,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "a search without a query",
    method: "GET",
    path: () => "/api/search",
    status: 400,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "the caller's memories",
    method: "GET",
    path: () => "/api/memories",
    status: 200,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "a memory erased",
    method: "DELETE",
    path: () => `/api/memories/${thread.memory}`,
    status: 200,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "an unknown memory erased",
    method: "DELETE",
    path: () => `/api/memories/${randomUUID()}`,
    status: 404,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "all memories erased",
    method: "DELETE",
    path: () => "/api/memories",
    status: 200,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "the caller's usage per model",
    method: "GET",
    path: () => "/api/usage?groupBy=model",
    status: 200,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "the caller's usage grouped by an unknown key",
    method: "GET",
    path: () => "/api/usage?groupBy=week",
    status: 400,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "the model and inference mode",
    method: "GET",
    path: () => "/api/info",
    status: 200,
    send: (p, m) => authenticated(m, p),
  },
  { name: "the health check", method: "GET", path: () => "/health", status: 200, send: (p) => app.request(p) },
  {
    name: "the health check without a database",
    method: "GET",
    path: () => "/health",
    status: 503,
    send: (p) => createTestApp(unreachableDatabase).app.request(p),
  },
  {
    name: "readiness",
    method: "GET",
    path: () => "/health/ready",
    status: 200,
    send: (p) =>
      createTestApp(bed.db.pool, { engineProbe: { check: async () => ({ reachable: true }) } }).app.request(p),
  },
  {
    name: "readiness with Inngest unreachable",
    method: "GET",
    path: () => "/health/ready",
    status: 503,
    send: (p) =>
      createTestApp(bed.db.pool, {
        engineProbe: { check: async () => ({ reachable: false, reason: "ECONNREFUSED" }) },
      }).app.request(p),
  },
  {
    name: "the OpenAPI document",
    method: "GET",
    path: () => "/openapi.json",
    status: 200,
    send: (p) => app.request(p),
  },
  { name: "the reference page", method: "GET", path: () => "/docs", status: 200, send: (p) => app.request(p) },
  {
    name: "Inngest's introspection",
    method: "GET",
    path: () => "/api/inngest",
    status: 200,
    send: (p) => app.request(p),
  },
  ...REFERENCE_ASSETS.map(({ path, file }) => ({
    name: `the reference page's ${file}`,
    method: "GET",
    path: () => path,
    status: 200,
    send: (p: string) => app.request(p),
  })),
  ...PLAYGROUND_FILES.map(({ path, file }) => ({
    name: `the playground's ${file}`,
    method: "GET",
    path: () => path,
    status: 200,
    send: (p: string) => app.request(p),
  })), // The conversation tree, last: the switch changes the thread's path.
  {
    name: "an edit of a user message",
    method: "POST",
    path: () => `${messagesOf(thread.threadId)}/${thread.first}/edit`,
    status: 202,
    send: (p, m) => authenticated(m, p, json({ messageId: randomUUID(), content: "Say hello" })),
  },
  {
    name: "a switch to another branch",
    method: "PUT",
    path: () => `${messagesOf(thread.threadId)}/${thread.offPath}/current`,
    status: 200,
    send: (p, m) => authenticated(m, p),
  },
  {
    name: "a deletion of the branch now off the path",
    method: "DELETE",
    path: () => `${messagesOf(thread.threadId)}/${thread.answer}/branch`,
    status: 200,
    send: (p, m) => authenticated(m, p),
  },
];

describe("responses match their documented schemas", () => {
  const answered = new Set<string>();

  for (const { name, method, path, status, send } of cases) {
    it(`${name}: ${method} ${status}`, async () => {
      const response = await send(path(), method);
      expect(response.status).toBe(status);
      answered.add(await expectDocumentedResponse(spec, method, path(), response));
    });
  }

  it("a body that differs from the documented schema fails the check", async () => {
    const { operation } = operationFor(spec, "GET", messagesOf(thread.threadId));
    const schema = documentedSchema(spec, operation.responses["200"]!.content!["application/json"]!.schema);
    const page = (await (await authenticated("GET", messagesOf(thread.threadId))).json()) as {
      messages: Record<string, unknown>[];
    };
    expect(schema.safeParse(page).success).toBe(true);
    expect(schema.safeParse({ ...page, hasMore: "yes" }).success).toBe(false);
    expect(schema.safeParse({ ...page, messages: [{ ...page.messages[0], role: "robot" }] }).success).toBe(false);
    expect(schema.safeParse({ ...page, undocumented: 1 }).success).toBe(false);
  });

  it("covers every documented operation's success answer and every documented error status", () => {
    const successes = documentedOperations(spec).filter((operation) => {
      const { responses } = operationFor(
        spec,
        operation.split(" ")[0]!,
        operation.split(" ")[1]!.replace(/\{\w+\}/g, "x"),
      ).operation;
      return Object.entries(responses).some(([status, response]) => status.startsWith("2") && response.content);
    });
    const answeredSuccesses = [...answered]
      .filter((entry) => / 2\d\d$/.test(entry))
      .map((entry) => entry.replace(/ \d+$/, ""));
    expect(successes.filter((operation) => !answeredSuccesses.includes(operation))).toEqual([]);
    const answeredStatuses = new Set([...answered].map((entry) => Number(entry.split(" ").at(-1))));
    expect([400, 401, 404, 409, 413, 415, 422, 500, 503].filter((status) => !answeredStatuses.has(status))).toEqual([]);
  });
});
