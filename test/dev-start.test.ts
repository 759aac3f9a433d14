import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { startAppProcess, type AppProcess } from "./helpers/app-process.js";
import { createTestDatabase, type TestDatabase } from "./helpers/database.js";
import { startEngineStandIn, type EngineStandIn } from "./helpers/engine-stand-in.js";
import { startModelServer, type ModelServer } from "./helpers/model-server.js";

/**
 * The start-ups a new user runs, as processes over real HTTP, against a stand-in for the Inngest
 * dev server on loopback: the chat event must reach the engine (the SDK client must be in dev
 * mode however the modules were imported) and the run's answer must be readable.
 */
let db: TestDatabase;
let model: ModelServer;
let engine: EngineStandIn;
let app: AppProcess | undefined;

beforeAll(async () => {
  db = await createTestDatabase();
  model = await startModelServer();
});
afterAll(async () => {
  await model.close();
  await db.drop();
});
afterEach(async () => {
  await app?.stop();
  app = undefined;
  await engine?.close();
});

const modelEnv = () => ({ OPENAI_API_KEY: "test-key", OPENAI_BASE_URL: model.baseUrl, MODEL: "scripted-model" });

/** Sends a first message as `user`, waits for the stored answer and returns what the API shows. */
async function sendAndReadAnswer(url: string, user: string) {
  const messageId = randomUUID();
  const sent = await fetch(`${url}/api/chat`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-threadline-user": user },
    body: JSON.stringify({ messageId, content: "Hello, engine" }),
  });
  const accepted = { status: sent.status, body: (await sent.json()) as Record<string, unknown> };
  const run = await engine.runFor((r) => r.fnId === "threadline-chat-turn" && r.event.data.messageId === messageId);
  await run.ended;
  const page = await fetch(`${url}/api/threads/${messageId}/messages`, { headers: { "x-threadline-user": user } });
  const { messages } = (await page.json()) as {
    messages: { role: string; content: { text?: string; output?: { content: string }[] }; turn?: { status: string } }[];
  };
  return { messageId, accepted, run, messages };
}

describe("npm run dev (scripts/dev.ts)", () => {
  it("chooses the dev server for the client it sends with: POST /api/chat reaches the dev server and the answer is readable", async () => {
    engine = await startEngineStandIn();
    model.script({ text: "Hello from the model" });
    // As a new user starts it: INNGEST_DEV unset (dev.ts sets it), the dev server elsewhere on loopback.
    app = await startAppProcess("scripts/dev.ts", {
      DATABASE_URL: db.url,
      INNGEST_BASE_URL: engine.url,
      ...modelEnv(),
    });
    await engine.registerApp(`${app.url}/api/inngest`);

    const { messageId, accepted, run, messages } = await sendAndReadAnswer(app.url, "dev-user");

    expect(accepted).toEqual({ status: 202, body: expect.objectContaining({ messageId, threadId: messageId }) });
    expect(engine.events.filter((e) => e.name === "chat/message.sent").map((e) => e.data)).toEqual([
      expect.objectContaining({ messageId, userId: "dev-user" }),
    ]);
    expect(run.status).toBe("completed");
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(JSON.stringify(messages[1]!.content)).toContain("Hello from the model");
    expect(messages[0]!.turn?.status).toBe("completed");
    // The gateway inference was performed by the engine (the title function may ask the model too).
    expect(run.inferences).toEqual([{ url: new URL("chat/completions", model.baseUrl).href, status: 200 }]);
    expect(app.output()).not.toContain("inngest-cli");
  });
});

describe("docker compose (docker-compose.yml, the app service)", () => {
  type Compose = { services: Record<string, { command?: string; environment?: Record<string, string> }> };
  const compose = async () => parse(await readFile("docker-compose.yml", "utf8")) as Compose;

  it("points the app at the compose dev server and the dev server at the app", async () => {
    const { services } = await compose();
    const env = services.app!.environment!;
    expect(env.INNGEST_BASE_URL).toBe("http://inngest:8288");
    expect(["1", "true"]).toContain(env.INNGEST_DEV);
    expect(services.inngest!.command).toContain(`-u http://app:${env.PORT}/api/inngest`);
  });

  it("with the app service's environment, POST /api/chat reaches the dev server and the answer is readable", async () => {
    const { services } = await compose();
    // The compose values, with the hosts only compose can resolve replaced by this machine's.
    const env = Object.fromEntries(
      Object.entries(services.app!.environment!).filter(([, value]) => !/^\$\{/.test(value)),
    );
    engine = await startEngineStandIn();
    model.script({ text: "Hello from compose" });
    // The image runs the server itself (Dockerfile CMD), not scripts/dev.ts.
    app = await startAppProcess("src/main.ts", {
      ...env,
      DATABASE_URL: db.url,
      INNGEST_BASE_URL: engine.url,
      ...modelEnv(),
    });
    await engine.registerApp(`${app.url}/api/inngest`);

    const { accepted, run, messages } = await sendAndReadAnswer(app.url, "compose-user");

    expect(accepted.status).toBe(202);
    expect(run.status).toBe("completed");
    expect(JSON.stringify(messages.at(-1)!.content)).toContain("Hello from compose");
  });
});
