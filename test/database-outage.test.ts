import { afterAll, beforeAll, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, scriptedModel, threadRows, turnsOf } from "./helpers/fixtures.js";
import { startModelServer, type ModelServer } from "./helpers/model-server.js";
import { startOwnDatabase, type OwnDatabase } from "./helpers/own-database.js";

// A PostgreSQL server this test owns, so it can stop it in the middle of a turn.
let database: OwnDatabase;
let server: OwnDatabase["server"];
let pool: OwnDatabase["pool"];
let model: ModelServer;

beforeAll(async () => {
  [database, model] = await Promise.all([startOwnDatabase("outage"), startModelServer()]);
  ({ server, pool } = database);
}, 120_000);
afterAll(async () => {
  await database?.close();
  await model?.close();
});

it("fails the step that meets a stopped database, then completes the turn once the database is back, losing and doubling nothing", async () => {
  const chatTurn = createChatTurn({ db: pool, model: scriptedModel(model) });
  const event = chatEvent({ content: "Will you remember this after an outage?" });
  model.script({ text: "Yes, I will.", delayMs: 300 });

  // The database goes away while the model is thinking: after the user message and history steps.
  const outage = (async () => {
    while (model.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    await server.stop();
  })();
  const failed = await execute(chatTurn, event);
  await outage;

  expect(failed.error).toBeDefined();
  expect(String((failed.error as Error).message)).toMatch(/ECONNREFUSED|terminat|connect|shut/i);

  await server.start();
  const retried = await execute(chatTurn, event, { memo: failed.memo, runId: failed.runId });

  expect(retried.error).toBeUndefined();
  expect(retried.result).toMatchObject({ status: "completed", answer: "Yes, I will." });
  // The inference result was memoized: the model was asked once.
  expect(model.requests).toHaveLength(1);
  const rows = await threadRows(pool, event.data.messageId);
  expect(rows.map((r) => [r.seq, r.kind])).toEqual([
    [1, "user"],
    [2, "agent"],
  ]);
  expect(await turnsOf(pool, event.data.messageId)).toMatchObject([{ status: "completed" }]);
}, 60_000);
