import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AppProcess, startAppProcess } from "./helpers/app-process.js";
import { createTestDatabase, type TestDatabase } from "./helpers/database.js";
import { type EngineStandIn, startEngineStandIn } from "./helpers/engine-stand-in.js";
import { type ModelServer, startModelServer } from "./helpers/model-server.js";

/**
 * Scaling past one process (issue 19): two app processes (src/main.ts) on one database, behind a
 * round-robin proxy that stands in for the load balancer (deploy/haproxy.cfg). Clients post their
 * messages to both apps directly; the engine stand-in (async mode, performing step.ai.infer
 * against the scripted model) reaches the apps through the proxy, so the requests of one run land
 * on both processes, as they do in production where every replica advertises the balancer's URL.
 * Once a thread's first message is stored, its follow-ups are sent each as soon as the previous one
 * is accepted, so a thread's later turns wait durably for its earlier ones while the other process
 * runs them.
 */
const THREADS = 8;
const PER_THREAD = 5;
const USER = "topology-user";
/** An upper bound on the load being answered (the machine may be shared and loaded), never a wait. */
const PATIENCE_MS = 60_000;

let db: TestDatabase;
let model: ModelServer;
let engine: EngineStandIn;
let balancer: RoundRobin;
const apps: AppProcess[] = [];

type RoundRobin = { url: string; served: number[]; setTargets: (urls: string[]) => void; close: () => Promise<void> };

/** Forwards each request, whole, to the next target in turn and counts what each one served. */
async function startRoundRobin(): Promise<RoundRobin> {
  let targets: string[] = [];
  const served: number[] = [];
  let next = 0;
  const server: Server = createServer(async (req, res) => {
    const at = next++ % targets.length;
    served[at] = (served[at] ?? 0) + 1;
    const body = await readBody(req);
    const headers = Object.fromEntries(
      Object.entries(req.headers).filter(
        (entry): entry is [string, string] =>
          typeof entry[1] === "string" && !["host", "connection", "content-length"].includes(entry[0]),
      ),
    );
    try {
      const answer = await fetch(`${targets[at]}${req.url}`, {
        method: req.method,
        headers,
        ...(body.length > 0 && { body: new Uint8Array(body) }),
      });
      const text = Buffer.from(await answer.arrayBuffer());
      const forwarded = Object.fromEntries(
        [...answer.headers].filter(([name]) => !["content-length", "content-encoding", "connection"].includes(name)),
      );
      res.writeHead(answer.status, forwarded).end(text);
    } catch (error) {
      res.writeHead(502).end(String(error));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    served,
    setTargets: (urls) => {
      targets = urls;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const readBody = (req: IncomingMessage) =>
  new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });

beforeAll(async () => {
  [db, model, engine, balancer] = await Promise.all([
    createTestDatabase(),
    startModelServer(),
    // The chat turn alone: titles and summaries would ask the model too, and the count checks one request per turn.
    startEngineStandIn({ functions: (id) => id === "threadline-chat-turn" }),
    startRoundRobin(),
  ]);
  const env = {
    DATABASE_URL: db.url,
    NODE_ENV: "development",
    AUTH: "dev",
    INNGEST_DEV: "1",
    INNGEST_BASE_URL: engine.url,
    INNGEST_SERVE_ORIGIN: balancer.url,
    OPENAI_API_KEY: "test-key",
    OPENAI_BASE_URL: model.baseUrl,
    MODEL: "scripted-model",
  };
  // Started together: both migrate the same fresh database at once (the migrator's advisory lock).
  apps.push(...(await Promise.all([startAppProcess("src/main.ts", env), startAppProcess("src/main.ts", env)])));
  balancer.setTargets(apps.map((app) => app.url));
  await engine.registerApp(`${balancer.url}/api/inngest`);
}, 120_000);

afterAll(async () => {
  await engine?.close();
  await Promise.all(apps.map((app) => app.stop()));
  await balancer?.close();
  await model?.close();
  await db?.drop();
});

type ApiMessage = { id: string; role: string; content: unknown; turn?: { status: string } };

describe("two app processes on one database", () => {
  it(`${THREADS * PER_THREAD} messages over ${THREADS} threads, sent through both apps at once: each stored once, answered once, in order`, {
    timeout: 120_000,
  }, async () => {
    const total = THREADS * PER_THREAD;
    model.script(...Array.from({ length: total }, (_, i) => ({ text: `answer ${i}` })));
    const contents = (thread: number) => Array.from({ length: PER_THREAD }, (_, k) => `thread ${thread} message ${k}`);

    // Each thread's messages one after another (a follow-up right after the last was accepted), the threads at once.
    const threadIds = await Promise.all(
      Array.from({ length: THREADS }, async (_, t) => {
        let threadId: string | undefined;
        for (const [k, content] of contents(t).entries()) {
          const app = apps[(t + k) % apps.length]!;
          const messageId = randomUUID();
          const sent = await fetch(`${app.url}/api/chat`, {
            method: "POST",
            headers: { "content-type": "application/json", "x-threadline-user": USER },
            body: JSON.stringify({ messageId, content, ...(threadId && { threadId }) }),
          });
          expect(sent.status, await sent.clone().text()).toBe(202);
          // The follow-ups go at once: one may be stored before the first message, whose turn then waits for it.
          if (threadId) continue;
          threadId = ((await sent.json()) as { threadId: string }).threadId;
        }
        return threadId!;
      }),
    );

    await expect
      .poll(
        async () =>
          (await db.pool.query("SELECT count(*)::int AS n FROM turns WHERE status <> 'running'")).rows[0].n as number,
        { timeout: PATIENCE_MS, interval: 100 },
      )
      .toBe(total);
    const runs = engine.runs.filter((run) => run.fnId === "threadline-chat-turn");
    await Promise.all(runs.map((run) => run.ended));
    expect(runs.map((run) => run.status)).toEqual(Array(total).fill("completed"));
    // Later turns waited durably for earlier ones (the wait's step is memoized in their runs).
    const waited = runs.filter((run) => run.order.some((s) => s.id.startsWith("history.wait-for-turn")));
    expect(waited.length).toBeGreaterThan(0);
    // Both processes served the engine's step requests.
    expect(balancer.served).toHaveLength(2);
    expect(Math.min(...balancer.served)).toBeGreaterThan(0);

    const stored: string[][] = [];
    for (const [t, threadId] of threadIds.entries()) {
      const app = apps[t % apps.length]!;
      const page = await fetch(`${app.url}/api/threads/${threadId}/messages`, {
        headers: { "x-threadline-user": USER },
      });
      expect(page.status).toBe(200);
      const { messages } = (await page.json()) as { messages: ApiMessage[] };
      expect(messages.map((m) => m.role)).toEqual(Array(PER_THREAD).fill(["user", "assistant"]).flat());
      // Stored in the order the turns began (a follow-up sent before its predecessor's run stored it
      // may come first, with one process as with two): every message once, each answered right after it.
      const users = messages.filter((m) => m.role === "user");
      const texts = users.map((m) => (m.content as { text: string }).text);
      expect([...texts].sort()).toEqual(contents(t));
      stored.push(texts);
      expect(users.map((m) => m.turn?.status)).toEqual(Array(PER_THREAD).fill("completed"));
      const { rows } = await db.pool.query(
        "SELECT m.id, count(t.run_id)::int AS turns FROM messages m LEFT JOIN turns t ON t.message_id = m.id WHERE m.thread_id = $1 AND m.kind = 'user' GROUP BY m.id",
        [threadId],
      );
      expect(rows.map((row) => row.turns)).toEqual(Array(PER_THREAD).fill(1));
    }

    // One model request per turn, each asking about its own message with the thread's earlier ones before it, in stored order.
    expect(model.requests).toHaveLength(total);
    for (const texts of stored) {
      for (const [k, content] of texts.entries()) {
        const asked = model.requests.filter((request) => request.messages.at(-1)?.content === content);
        expect(asked, content).toHaveLength(1);
        const earlier = asked[0]!.messages
          .filter((m) => m.role === "user")
          .map((m) => m.content)
          .slice(0, -1);
        expect(earlier, content).toEqual(texts.slice(0, k));
      }
    }
  });
});
