import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inngest } from "../inngest.config.js";
import { chooseModel } from "../src/agents/model.js";
import { readEnvironment } from "../src/config.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createModelInference } from "../src/functions/model-inference.js";
import { CHAT_TURN_ID } from "../src/functions/turn-lifecycle.js";
import { createTestDatabase, type TestDatabase } from "./helpers/database.js";
import { type EngineStandIn, startEngineStandIn } from "./helpers/engine-stand-in.js";
import { serveToStandIn } from "./helpers/http.js";
import { type ModelServer, startModelServer } from "./helpers/model-server.js";
import { seedThread } from "./helpers/seed.js";

/**
 * A turn under the SDK's checkpoint mode (the executor names the function, so the SDK runs the
 * steps it can in one request and reports them to Inngest): the app served over HTTP to the
 * engine stand-in in that mode, INFERENCE=gateway (the turn invokes model-inference).
 */
let db: TestDatabase;
let model: ModelServer;
let engine: EngineStandIn;
let app: Awaited<ReturnType<typeof serveToStandIn>>;

beforeAll(async () => {
  db = await createTestDatabase();
  model = await startModelServer();
  engine = await startEngineStandIn({ checkpoint: true });
  // The serve handler's Inngest client is built with the app: it reports checkpoints to the stand-in.
  process.env.INNGEST_BASE_URL = engine.url;
  const choice = chooseModel(
    readEnvironment({ OPENAI_BASE_URL: model.baseUrl, OPENAI_API_KEY: "test", MODEL: "test-model" }),
  );
  app = await serveToStandIn(db.pool, engine, [
    createChatTurn({ db: db.pool, model: choice }),
    createModelInference({ model: choice }),
  ]);
});

afterAll(async () => {
  await engine?.close();
  await app?.close();
  await model?.close();
  await db?.drop();
});

describe("a chat turn in checkpoint mode", () => {
  it("stores the answer, with every step memoized in order and reported in one checkpoint before the model call", async () => {
    const { threadId, userId } = await seedThread(db.pool, { turns: 2 });
    model.script({ text: "Read the third one." });
    const messageId = randomUUID();
    const event = await engine.send({
      name: "chat/message.sent",
      data: { threadId, userId, messageId, content: "What should I read next?" },
    });
    const run = await engine.runFor((r) => r.event.id === event.id && r.fnId === `${inngest.id}-${CHAT_TURN_ID}`);
    await run.ended;

    expect(run.status).toBe("completed");
    const { rows } = await db.pool.query(
      "SELECT content FROM messages WHERE thread_id = $1 AND answers = $2 AND kind = 'agent'",
      [threadId, messageId],
    );
    expect(rows.map((r) => r.content.output[0].content)).toEqual(["Read the third one."]);
    // Every step is memoized by the executor, in the order the turn took them.
    const ids = run.order.map((s) => s.id);
    const at = ["history.append-user-message", "assistant", "history.append-results"].map((id) => ids.indexOf(id));
    expect(at.every((i) => i >= 0)).toBe(true);
    expect(at).toEqual([...at].sort((a, b) => a - b));
    // The steps after the model call come back with the run's end, in the same request.
    expect(run.checkpoints).toBe(1);
  });
});
