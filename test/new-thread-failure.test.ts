import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inngest } from "../inngest.config.js";
import { chooseModel } from "../src/agents/model.js";
import { readEnvironment } from "../src/config.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createModelInference } from "../src/functions/model-inference.js";
import { CHAT_TURN_ID } from "../src/functions/turn-lifecycle.js";
import { createEventNotifier, type EventNotifier } from "../src/stream/notifier.js";
import { createTestDatabase, type TestDatabase } from "./helpers/database.js";
import { within } from "./helpers/deadline.js";
import { type EngineStandIn, startEngineStandIn } from "./helpers/engine-stand-in.js";
import { headersFor, serveToStandIn } from "./helpers/http.js";
import { uiChunks } from "./helpers/sse.js";
import { type ModelServer, startModelServer } from "./helpers/model-server.js";

/**
 * The app as deployed, its functions run by the engine stand-in over the serve protocol: a new
 * thread's first message, sent with useChat (POST /api/ui/chat), whose run's first step cannot
 * store it through all its retries. Inngest then runs onFailure with the failed run's event; the
 * open stream must end with the cause and [DONE], not heartbeats for ever. Sent again once the
 * database writes again, the message is answered.
 */
const OUTAGE = "could not extend file: No space left on device";
const userId = "user-1";
let db: TestDatabase;
let model: ModelServer;
let engine: EngineStandIn;
let events: EventNotifier;
let app: Awaited<ReturnType<typeof serveToStandIn>>;
let url: string;

beforeAll(async () => {
  db = await createTestDatabase();
  model = await startModelServer();
  engine = await startEngineStandIn();
  process.env.INNGEST_BASE_URL = engine.url;
  const choice = chooseModel(
    readEnvironment({ OPENAI_BASE_URL: model.baseUrl, OPENAI_API_KEY: "test", MODEL: "test-model" }),
  );
  events = createEventNotifier(db.pool);
  app = await serveToStandIn(
    db.pool,
    engine,
    [createChatTurn({ db: db.pool, model: choice }), createModelInference({ model: choice })],
    { events },
  );
  url = app.url;
});

afterAll(async () => {
  await engine?.close();
  await events?.close();
  await app?.close();
  await model?.close();
  await db?.drop();
});

/** useChat sending `text` as message `messageId` of chat `threadId`. */
const send = async (threadId: string, messageId: string, text: string) =>
  fetch(`${url}/api/ui/chat`, {
    method: "POST",
    headers: await headersFor(userId),
    body: JSON.stringify({
      id: threadId,
      trigger: "submit-message",
      messages: [{ id: messageId, role: "user", parts: [{ type: "text", text }] }],
    }),
  });

describe("a new thread's first message whose first step fails through its retries, over the engine stand-in", () => {
  it("ends useChat's stream with the cause and [DONE]; sent again once storage works, it is answered", async () => {
    // No user message can be stored: every attempt of history.append-user-message fails.
    await db.pool.query(`
      CREATE FUNCTION test_storage_down() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION '${OUTAGE}'; END $$;
      CREATE TRIGGER test_storage_down BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION test_storage_down();`);
    const threadId = randomUUID();
    const messageId = randomUUID();
    const response = await send(threadId, messageId, "My name is Ada.");
    expect(response.status).toBe(200);

    expect(await within(uiChunks(response), "the UI message stream ends")).toEqual([
      { type: "error", errorText: OUTAGE },
      { type: "finish", finishReason: "error", messageMetadata: { status: "failed" } },
      "[DONE]",
    ]);
    const failed = engine.runs.find((run) => run.fnId === `${inngest.id}-${CHAT_TURN_ID}`)!;
    expect(failed.status).toBe("failed");

    await db.pool.query("DROP TRIGGER test_storage_down ON messages");
    model.script({ text: "Hello, Ada." });
    const again = await send(threadId, messageId, "My name is Ada.");
    expect(again.status).toBe(200);
    const answer = await within(uiChunks(again), "the second UI message stream ends");
    expect(answer.map((chunk) => (typeof chunk === "string" ? chunk : chunk.type))).not.toContain("error");
    expect(answer.at(-2)).toMatchObject({ type: "finish", messageMetadata: { status: "completed" } });
  });
});
