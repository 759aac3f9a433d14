import { randomUUID } from "node:crypto";
import type pg from "pg";
import { chooseModel } from "../../src/agents/model.js";
import { readEnvironment } from "../../src/config.js";
import { expect } from "vitest";
import type { InngestFunction } from "inngest";
import { execute } from "./engine.js";
import type { ModelServer } from "./model-server.js";

/** The model configuration a deployment pointing at the scripted server would have. */
export const scriptedModel = (server: ModelServer) =>
  chooseModel(
    readEnvironment({ OPENAI_BASE_URL: server.baseUrl, OPENAI_API_KEY: "test-key", MODEL: "scripted-model" }),
  );

export const chatEvent = (data: { content: string; userId?: string; threadId?: string; messageId?: string }) => ({
  name: "chat/message.sent",
  data: { messageId: randomUUID(), userId: "user-1", ...data },
});

export type StoredRow = {
  id: string;
  seq: number;
  kind: string;
  agent_name: string;
  content: unknown;
  answers: string | null;
  variant: number | null;
  on_path: boolean;
};

/** Every stored message of a thread, in insertion order, for assertions. */
export async function threadRows(db: pg.Pool, threadId: string): Promise<StoredRow[]> {
  const { rows } = await db.query(
    "SELECT id, seq::int AS seq, kind, agent_name, content, answers, variant, on_path FROM messages WHERE thread_id = $1 ORDER BY seq",
    [threadId],
  );
  return rows;
}

export async function countRows(db: pg.Pool): Promise<{ threads: number; messages: number; turns: number }> {
  const { rows } = await db.query(
    "SELECT (SELECT count(*)::int FROM threads) AS threads, (SELECT count(*)::int FROM messages) AS messages, (SELECT count(*)::int FROM turns) AS turns",
  );
  return rows[0];
}

export async function turnsOf(db: pg.Pool, messageId: string) {
  const { rows } = await db.query(
    "SELECT run_id, kind, variant, status, error FROM turns WHERE message_id = $1 ORDER BY started_at",
    [messageId],
  );
  return rows as { run_id: string; kind: string; variant: number; status: string; error: string | null }[];
}

/**
 * A new thread of answered turns, sent one after the other through the chat turn function. The
 * model's recorded requests are cleared afterwards, so a test sees only what follows.
 */
export async function conversation(
  chatTurn: InngestFunction.Like,
  model: ModelServer,
  turns: [question: string, answer: string][],
) {
  const threadId = randomUUID();
  const messageIds: string[] = [];
  for (const [question, answer] of turns) {
    model.script({ text: answer });
    const event = chatEvent({
      content: question,
      messageId: messageIds.length === 0 ? threadId : randomUUID(),
      ...(messageIds.length ? { threadId } : {}),
    });
    expect((await execute(chatTurn, event)).error).toBeUndefined();
    messageIds.push(event.data.messageId);
  }
  model.reset();
  return { threadId, messageIds };
}

/**
 * A thread with one answered turn and a second message (`content`) whose turn is running: its
 * inference failed once and awaits a retry (`attempt` is that execution).
 */
export async function threadWithRunningTurn(
  db: pg.Pool,
  chatTurn: InngestFunction.Like,
  model: ModelServer,
  content: string,
) {
  const { threadId } = await conversation(chatTurn, model, [["My name is Ada.", "Hello, Ada."]]);
  const event = chatEvent({ threadId, content });
  model.script({ status: 503, body: { error: { message: "The engine is currently overloaded" } } });
  const attempt = await execute(chatTurn, event);
  expect(attempt.error).toBeDefined();
  expect(await turnsOf(db, event.data.messageId)).toMatchObject([{ status: "running" }]);
  model.reset();
  return { threadId, event, attempt };
}

/** Whether text holds half a surrogate pair: strict JSON parsers (model providers') refuse it. */
export const hasLoneSurrogate = (text: string) =>
  /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text);
