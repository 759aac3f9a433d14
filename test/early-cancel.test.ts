import { randomUUID } from "node:crypto";
import { DefaultChatTransport, type UIMessage } from "ai";
import type pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { inngest } from "../inngest.config.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createModelInference } from "../src/functions/model-inference.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { CHAT_TURN_ID, createTurnCancellation, REGENERATE_ID } from "../src/functions/turn-lifecycle.js";
import { beginTurn } from "../src/history/store.js";
import { CANCELLED_BEFORE_ANSWERING, CANCELLED_BEFORE_BEGIN, cancelTurn } from "../src/history/turns.js";
import { until, within } from "./helpers/deadline.js";
import { headersFor } from "./helpers/http.js";
import { withPausedFunction } from "./helpers/paused-function.js";
import { openEventStream, uiChunks } from "./helpers/sse.js";
import { Chat } from "./helpers/use-chat.js";
import { useStandInBed } from "./helpers/stand-in-bed.js";

/**
 * The app as deployed, its functions run by the engine stand-in over the serve protocol: a chat
 * message sent with useChat (POST /api/ui/chat) whose run is cancelled while still queued (an
 * operator cancelling runs from the dashboard or the REST API after an incident): its run never
 * began a turn. The open stream must end as cancelled, not heartbeat for ever, and the message can
 * be sent again.
 */
const CHAT_TURN = `${inngest.id}-${CHAT_TURN_ID}`;
const REGENERATE = `${inngest.id}-${REGENERATE_ID}`;
const userId = "user-1";
// Idempotency keys modelled: a message sent again after its run was cancelled must start a run.
const bed = useStandInBed(
  ({ db, model }) => [
    createChatTurn({ db, model }),
    createModelInference({ model }),
    createRegenerate({ db, model }),
    createTurnCancellation({ db }),
  ],
  { idempotency: true },
);

// A test that failed while holding runs does not hold the next test's.
afterEach(() => {
  bed.engine.release(CHAT_TURN);
  bed.engine.release(REGENERATE);
});

/** Sends `text` and reads the answer's stream to its end: it must complete. */
async function answered(threadId: string, messageId: string, text: string, answer: string) {
  bed.model.script({ text: answer });
  const response = await bed.send(threadId, messageId, text);
  expect(response.status).toBe(200);
  const read = await within(uiChunks(response), "the answer's UI message stream ends");
  expect(read.at(-2)).toMatchObject({ type: "finish", messageMetadata: { status: "completed" } });
  return read;
}

/** The queued chat-turn run answering message `messageId`. */
const queuedRun = (messageId: string) =>
  bed.engine.runFor(
    (run) => run.fnId === CHAT_TURN && run.status === "queued" && run.event.data.messageId === messageId,
  );

/** useChat (the `ai` client) on chat `threadId`, as the user, through the app's route. */
const useChat = async (threadId: string) =>
  new Chat({
    id: threadId,
    transport: new DefaultChatTransport<UIMessage>({
      api: `${bed.url}/api/ui/chat`,
      headers: await headersFor(userId),
    }),
  });

/**
 * Sends with `send` while chat-turn runs are held, cancels the queued run of the words `content`
 * as an operator does, and waits for the client's request to end.
 */
async function cancelledWhileQueued(send: () => Promise<void>, content: string) {
  bed.engine.hold(CHAT_TURN);
  const sending = send();
  const run = await bed.engine.runFor(
    (r) => r.fnId === CHAT_TURN && r.status === "queued" && r.event.data.content === content,
  );
  bed.engine.cancel(run);
  await within(sending, "useChat's request ends");
  bed.engine.release(CHAT_TURN);
}

/** A new thread of the user whose first message's turn is running (a later message's turn waits, or is refused by busy reject). */
async function threadAnswering(pool: pg.Pool) {
  const threadId = randomUUID();
  await beginTurn(pool, {
    threadId,
    userId,
    message: { id: randomUUID(), text: "Hello." },
    turn: { runId: `first-${threadId}`, kind: "chat" },
  });
  return threadId;
}

/**
 * A pool that runs `meanwhile` just before the second statement (or transaction) sent through it:
 * another writer committing between a function's statements.
 */
function racingPool(meanwhile: () => Promise<unknown>) {
  let statements = 0;
  const next = async () => {
    statements += 1;
    if (statements === 2) await meanwhile();
  };
  const pool = {
    query: async (...args: Parameters<pg.Pool["query"]>) => {
      await next();
      return bed.db.pool.query(...args);
    },
    connect: async () => {
      await next();
      return bed.db.pool.connect();
    },
  } as unknown as pg.Pool;
  return { pool, statements: () => statements };
}

/** The UI stream of a message whose run was cancelled before it began: the cause as an error, finish, [DONE]. */
const cancelledStream = [
  { type: "error", errorText: CANCELLED_BEFORE_BEGIN },
  { type: "finish", finishReason: "error", messageMetadata: { status: "cancelled" } },
  "[DONE]",
];

describe("a chat message whose run an operator cancels before it began a turn, over the engine stand-in", () => {
  it("on an existing thread: useChat's stream ends as cancelled, once; sent again, it is answered", async () => {
    const threadId = randomUUID();
    await answered(threadId, randomUUID(), "My name is Ada.", "Hello, Ada.");

    bed.engine.hold(CHAT_TURN);
    const messageId = randomUUID();
    const response = await bed.send(threadId, messageId, "What is my name?");
    expect(response.status).toBe(200);
    const run = await queuedRun(messageId);
    bed.engine.cancel(run);

    expect(await within(uiChunks(response), "the UI message stream ends")).toEqual(cancelledStream);
    const handler = await bed.cancellationHandled(run);
    expect(await bed.runRows(run.runId)).toEqual([
      { event: "message.cancelled", status: null },
      { event: "stream.ended", status: "cancelled" },
    ]);
    // The handler running again (Inngest retrying it, a rerun) writes nothing more.
    await within(bed.engine.rerun(handler).ended, "the rerun handler ends");
    expect(await bed.runRows(run.runId)).toHaveLength(2);
    const stored = await bed.db.pool.query("SELECT 1 FROM messages WHERE id = $1", [messageId]);
    expect(stored.rowCount).toBe(0);

    bed.engine.release(CHAT_TURN);
    await answered(threadId, messageId, "What is my name?", "Your name is Ada.");
  });

  it("on a new thread: useChat's stream ends as cancelled, the thread's events tell it; sent again, it is answered", async () => {
    bed.engine.hold(CHAT_TURN);
    const threadId = randomUUID();
    const messageId = randomUUID();
    const response = await bed.send(threadId, messageId, "My name is Grace.");
    expect(response.status).toBe(200);
    const run = await queuedRun(messageId);
    bed.engine.cancel(run);

    expect(await within(uiChunks(response), "the UI message stream ends")).toEqual(cancelledStream);
    const log = await openEventStream({ request: (path, init) => fetch(`${bed.url}${path}`, init) }, threadId);
    try {
      expect(log.response.status).toBe(200);
      await log.waitFor(2);
      expect(log.received.map(({ event, data }) => ({ event, data }))).toEqual([
        { event: "message.cancelled", data: { runId: run.runId, messageId, error: CANCELLED_BEFORE_BEGIN } },
        { event: "stream.ended", data: { scope: "network", status: "cancelled", runId: run.runId, messageId } },
      ]);
    } finally {
      await log.close();
    }

    bed.engine.release(CHAT_TURN);
    await answered(threadId, messageId, "My name is Grace.", "Hello, Grace.");
  });

  it("a regenerate: useChat's stream ends as cancelled, not saying to send the stored message again; asked again, it is answered", async () => {
    const threadId = randomUUID();
    const messageId = randomUUID();
    await answered(threadId, messageId, "Tell me a joke.", "Why did the chicken cross the road?");

    bed.engine.hold(REGENERATE);
    const regenerate = async () =>
      fetch(`${bed.url}/api/ui/chat`, {
        method: "POST",
        headers: await headersFor(userId),
        body: JSON.stringify({
          id: threadId,
          trigger: "regenerate-message",
          messages: [{ id: messageId, role: "user", parts: [{ type: "text", text: "Tell me a joke." }] }],
          messageId,
        }),
      });
    const response = await regenerate();
    expect(response.status).toBe(200);
    const run = await bed.engine.runFor((r) => r.fnId === REGENERATE && r.status === "queued");
    bed.engine.cancel(run);
    // The words are stored: sent again (as the cause said before), the thread would hold them twice.
    expect(await within(uiChunks(response), "the UI message stream ends")).toEqual([
      { type: "error", errorText: CANCELLED_BEFORE_ANSWERING },
      ...cancelledStream.slice(1),
    ]);
    const logged = await bed.db.pool.query(
      "SELECT data FROM thread_events WHERE run_id = $1 AND event = 'message.cancelled'",
      [run.runId],
    );
    expect(logged.rows).toEqual([{ data: { runId: run.runId, messageId, error: CANCELLED_BEFORE_ANSWERING } }]);

    bed.engine.release(REGENERATE);
    bed.model.script({ text: "Knock knock." });
    const again = await within(uiChunks(await regenerate()), "the second UI message stream ends");
    expect(again.at(-2)).toMatchObject({ type: "finish", messageMetadata: { status: "completed" } });
  });

  it("useChat (the `ai` client) shows the cause, as for a failure before the turn, and no empty answer", async () => {
    const threadId = randomUUID();
    const chat = await useChat(threadId);
    await cancelledWhileQueued(() => chat.sendMessage({ text: "Hello?" }), "Hello?");

    expect(chat.status).toBe("error");
    expect(chat.error?.message).toBe(CANCELLED_BEFORE_BEGIN);
    expect(chat.messages.map((message) => message.role)).toEqual(["user"]);
  });

  it("useChat's regenerate() after it asks again for the cancelled message, not the thread's earlier one", async () => {
    const threadId = randomUUID();
    const chat = await useChat(threadId);
    bed.model.script({ text: "Hi." });
    await within(chat.sendMessage({ text: "Hello." }), "the first answer ends");
    await cancelledWhileQueued(() => chat.sendMessage({ text: "Second question?" }), "Second question?");
    expect(chat.status).toBe("error");

    bed.model.reset();
    bed.model.script({ text: "Second answer." });
    await within(chat.regenerate(), "the regenerated answer ends");

    expect(chat.status).toBe("ready");
    expect(chat.messages.map((m) => [m.role, m.parts.flatMap((p) => (p.type === "text" ? [p.text] : []))])).toEqual([
      ["user", ["Hello."]],
      ["assistant", ["Hi."]],
      ["user", ["Second question?"]],
      ["assistant", ["Second answer."]],
    ]);
    // The model was asked the cancelled message, once; the first answer was not asked again.
    expect(bed.model.requests.map((request) => request.messages.at(-1)?.content)).toEqual(["Second question?"]);
    const stored = await bed.db.pool.query<{ kind: string; text: string; variant: number | null }>(
      "SELECT kind, content ->> 'text' AS text, variant FROM messages WHERE thread_id = $1 AND kind = 'user' ORDER BY seq",
      [threadId],
    );
    expect(stored.rows.map((row) => row.text)).toEqual(["Hello.", "Second question?"]);
    const variants = await bed.db.pool.query<{ n: number }>(
      "SELECT count(DISTINCT (answers, variant))::int AS n FROM messages WHERE thread_id = $1 AND kind = 'agent'",
      [threadId],
    );
    expect(variants.rows[0]!.n).toBe(2);
  });

  it("useChat's regenerate() on a new thread whose first message was cancelled answers it", async () => {
    const threadId = randomUUID();
    const chat = await useChat(threadId);
    await cancelledWhileQueued(() => chat.sendMessage({ text: "First words." }), "First words.");

    bed.model.reset();
    bed.model.script({ text: "An answer at last." });
    await within(chat.regenerate(), "the regenerated answer ends");

    expect(chat.status).toBe("ready");
    expect(chat.messages.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(chat.messages[1]!.parts).toContainEqual(
      expect.objectContaining({ type: "text", text: "An answer at last." }),
    );
    expect(bed.model.requests.map((request) => request.messages.at(-1)?.content)).toEqual(["First words."]);
  });

  it("useChat's regenerate() after a cancelled edit sends the edit again, not the original's words", async () => {
    const threadId = randomUUID();
    const chat = await useChat(threadId);
    bed.model.script({ text: "Paris." });
    await within(chat.sendMessage({ text: "Capital of France?" }), "the first answer ends");
    const asked = chat.messages[0]!.id;
    await cancelledWhileQueued(
      () => chat.sendMessage({ text: "Capital of Italy?", messageId: asked }),
      "Capital of Italy?",
    );
    expect(chat.status).toBe("error");

    bed.model.reset();
    bed.model.script({ text: "Rome." });
    await within(chat.regenerate(), "the regenerated answer ends");

    expect(chat.status).toBe("ready");
    expect(chat.messages.map((m) => m.parts.flatMap((p) => (p.type === "text" ? [p.text] : [])))).toEqual([
      ["Capital of Italy?"],
      ["Rome."],
    ]);
    expect(bed.model.requests.map((request) => request.messages.at(-1)?.content)).toEqual(["Capital of Italy?"]);
    // The edit is a sibling of the original, on the current path; the original's answer was not asked again.
    const stored = await bed.db.pool.query<{ text: string; on_path: boolean }>(
      "SELECT content ->> 'text' AS text, on_path FROM messages WHERE thread_id = $1 AND kind = 'user' ORDER BY seq",
      [threadId],
    );
    expect(stored.rows).toEqual([
      { text: "Capital of France?", on_path: false },
      { text: "Capital of Italy?", on_path: true },
    ]);
  });

  it("logs nothing on another user's thread", async () => {
    const threadId = randomUUID();
    await answered(threadId, randomUUID(), "Hello.", "Hi.");
    const before = await bed.db.pool.query("SELECT count(*)::int AS n FROM thread_events WHERE thread_id = $1", [
      threadId,
    ]);

    bed.engine.hold(CHAT_TURN);
    const messageId = randomUUID();
    await bed.engine.send({
      name: "chat/message.sent",
      data: { threadId, messageId, content: "Mine now.", userId: "user-2", busy: "enqueue" },
    });
    const run = await queuedRun(messageId);
    bed.engine.cancel(run);
    await bed.cancellationHandled(run);
    bed.engine.release(CHAT_TURN);

    expect(await bed.runRows(run.runId)).toEqual([]);
    const after = await bed.db.pool.query("SELECT count(*)::int AS n FROM thread_events WHERE thread_id = $1", [
      threadId,
    ]);
    expect(after.rows[0].n).toBe(before.rows[0].n);
  });

  it("a thread deleted while its message's run is queued: the stream ends as deleted, no thread comes back", async () => {
    const threadId = randomUUID();
    await answered(threadId, randomUUID(), "Hello.", "Hi.");

    bed.engine.hold(CHAT_TURN);
    const messageId = randomUUID();
    const response = await bed.send(threadId, messageId, "Still there?");
    const run = await queuedRun(messageId);
    const deleted = await fetch(`${bed.url}/api/threads/${threadId}`, {
      method: "DELETE",
      headers: await headersFor(userId),
    });
    expect(deleted.status).toBeLessThan(300);
    await until(() => run.status === "cancelled", "the thread's deletion cancels the queued run");

    const read = await within(uiChunks(response), "the UI message stream ends");
    expect(read[0]).toMatchObject({ type: "data-thread-deleted", data: { threadId } });
    expect(read.at(-2)).toMatchObject({ type: "finish", messageMetadata: { status: "deleted" } });
    await bed.cancellationHandled(run);
    bed.engine.release(CHAT_TURN);
    expect(await bed.runRows(run.runId)).toEqual([]);
    const thread = await bed.db.pool.query("SELECT 1 FROM threads WHERE id = $1", [threadId]);
    expect(thread.rowCount).toBe(0);
  });
});

describe("a cancellation while the run's first step executes (a step runs to its end)", () => {
  const runEvents = async (pool: typeof bed.db.pool, runId: string) =>
    (
      await pool.query<{ event: string }>("SELECT event FROM thread_events WHERE run_id = $1 ORDER BY id", [runId])
    ).rows.map((row) => row.event);

  it("logged first: the step stores nothing, on a new thread", async () => {
    const threadId = randomUUID();
    const runId = `run-${threadId}`;
    const sent = { threadId, messageId: threadId, userId, sentAt: Date.now() };
    expect(await cancelTurn(bed.db.pool, runId, sent)).toEqual({ threadId, messageId: threadId, unbegun: true });

    const begin = beginTurn(bed.db.pool, {
      threadId,
      userId,
      message: { id: threadId, text: "Hello?" },
      turn: { runId, kind: "chat", eventTime: sent.sentAt },
    });
    await expect(begin).rejects.toThrow(/cancelled before it stored message/);
    const stored = await bed.db.pool.query(
      "SELECT 1 FROM messages WHERE thread_id = $1 UNION ALL SELECT 1 FROM turns WHERE run_id = $2",
      [threadId, runId],
    );
    expect(stored.rowCount).toBe(0);
    expect(await runEvents(bed.db.pool, runId)).toEqual(["message.cancelled", "stream.ended"]);
  });

  it("a busy refusal the cancellation logged before: the run's log tells one ending, the cancellation", async () => {
    const threadId = await threadAnswering(bed.db.pool);
    const messageId = randomUUID();
    const runId = `run-${messageId}`;
    // The run's first step refuses the message (busy reject: a turn runs) and, before it logs the
    // refusal (its second statement), the cancellation is handled: it finds no turn and logs.
    const racing = racingPool(() => cancelTurn(bed.db.pool, runId, { threadId, messageId, userId }));
    const begin = beginTurn(racing.pool, {
      threadId,
      userId,
      message: { id: messageId, text: "Still there?" },
      turn: { runId, kind: "chat", busy: "reject" },
    });
    await expect(begin).rejects.toThrow(/still answering message/);
    expect(racing.statements()).toBeGreaterThanOrEqual(2);
    expect(await runEvents(bed.db.pool, runId)).toEqual(["message.cancelled", "stream.ended"]);
  });

  it("the turn begun after the cancellation looked for it, before it logged: recorded cancelled, released", async () => {
    const threadId = await threadAnswering(bed.db.pool);
    const messageId = randomUUID();
    const runId = `run-${messageId}`;
    // The run's first step commits its turn between the cancellation's first statement (no turn
    // yet) and its next one.
    const racing = racingPool(() =>
      beginTurn(bed.db.pool, {
        threadId,
        userId,
        message: { id: messageId, text: "Still there?" },
        turn: { runId, kind: "chat" },
      }),
    );

    expect(await cancelTurn(racing.pool, runId, { threadId, messageId, userId })).toEqual({ threadId, messageId });
    const turn = await bed.db.pool.query<{ status: string }>("SELECT status FROM turns WHERE run_id = $1", [runId]);
    expect(turn.rows).toEqual([{ status: "cancelled" }]);
    expect(await runEvents(bed.db.pool, runId)).toEqual(["turn.cancelled", "stream.ended"]);
  });

  it("the turn begun while the cancellation waited for the thread: recorded cancelled, released, its message not told unstored", async () => {
    const pause = { name: "threadline_begin_turn", at: "turn_ahead := status", when: "p_run_id LIKE 'paused-%'" };
    await withPausedFunction(pause, async ({ pool, pools, reachedPause, settled, release }) => {
      const threadId = await threadAnswering(pool);
      const messageId = randomUUID();
      const runId = `paused-${messageId}`;
      const begin = beginTurn(pools[0], {
        threadId,
        userId,
        message: { id: messageId, text: "Still there?" },
        turn: { runId, kind: "chat" },
      });
      await reachedPause();
      const cancelled = cancelTurn(pools[1], runId, { threadId, messageId, userId });
      await settled(cancelled);
      await release();
      await begin;

      // The turn to release (the handler announces turn.finished for it), recorded as cancelled.
      expect(await cancelled).toEqual({ threadId, messageId });
      const turn = await pool.query<{ status: string }>("SELECT status FROM turns WHERE run_id = $1", [runId]);
      expect(turn.rows).toEqual([{ status: "cancelled" }]);
      // The message is stored: its stream ends as a cancelled turn's, never telling it was not stored
      // (the client would offer to send it again, and the thread would hold the words twice).
      expect(await runEvents(pool, runId)).toEqual(["turn.cancelled", "stream.ended"]);
    });
  });

  it("the first turn of a new thread, begun while the cancellation waited for the thread: the same", async () => {
    const pause = { name: "threadline_begin_turn", at: "turn_ahead := status", when: "p_run_id LIKE 'paused-%'" };
    await withPausedFunction(pause, async ({ pool, pools, reachedPause, settled, release }) => {
      const messageId = randomUUID();
      const threadId = messageId;
      const runId = `paused-${messageId}`;
      const begin = beginTurn(pools[0], {
        threadId,
        userId,
        message: { id: messageId, text: "Hello?" },
        turn: { runId, kind: "chat" },
      });
      await reachedPause();
      const cancelled = cancelTurn(pools[1], runId, { threadId, messageId, userId, sentAt: Date.now() - 1_000 });
      await settled(cancelled);
      await release();
      await begin;

      expect(await cancelled).toEqual({ threadId, messageId });
      const turn = await pool.query<{ status: string }>("SELECT status FROM turns WHERE run_id = $1", [runId]);
      expect(turn.rows).toEqual([{ status: "cancelled" }]);
      expect(await runEvents(pool, runId)).toEqual(["turn.cancelled", "stream.ended"]);
    });
  });
});
