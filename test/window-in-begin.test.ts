import { randomUUID } from "node:crypto";
import { InngestExecutionEngine } from "inngest/internals";
import type pg from "pg";
import { describe, expect, it } from "vitest";
import { historyEnvironment, readEnvironment } from "../src/config.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { historyWindow, resolveHistoryPolicy } from "../src/history/policy.js";
import { beginTurn, readHistoryWindow, storeAnswer } from "../src/history/store.js";
import { storeSummary, SUMMARIZE_AFTER_MESSAGES } from "../src/history/summaries.js";
import { execute, type Memo, StepFault } from "./helpers/engine.js";
import { chatEvent, scriptedModel } from "./helpers/fixtures.js";
import { seedThread } from "./helpers/seed.js";
import { useTestBed } from "./helpers/test-bed.js";

/**
 * A turn with no unfinished turn ahead reads its history window in the statement that stores its
 * message (threadline_begin_turn), and takes no history.get step; a turn with one ahead, or a start
 * memoized before the statement read windows (a run in flight over a deploy), reads it in history.get.
 */

const bed = useTestBed();
const hashId = (id: string) => InngestExecutionEngine._internals.hashId(id);
const BEGIN = hashId("history.append-user-message");
const GET = hashId("history.get");

const window = historyWindow(resolveHistoryPolicy({}))!;
const history = { window, countUnsummarizedUpTo: SUMMARIZE_AFTER_MESSAGES + 1 };

const stepOutput = (memo: Memo, id: string) =>
  memo.find((step) => step.id === id)?.handler() as Record<string, unknown>;

/** A 30-turn thread whose summary covers its first 5 turns (so the window is sent after a summary row). */
async function summarizedThread() {
  const thread = await seedThread(bed.db.pool, { turns: 30, systemBefore: [2] });
  const { rows } = await bed.db.pool.query("SELECT path_version FROM threads WHERE id = $1", [thread.threadId]);
  const summary = { threadId: thread.threadId, coversThrough: 10, text: "The first five turns.", extends: null };
  expect(await storeSummary(bed.db.pool, { ...summary, pathVersion: Number(rows[0].path_version) })).toEqual({
    stored: true,
  });
  return thread;
}

describe("the history window read with the message", () => {
  it("an idle thread: no history.get step, and the window, summary and budgets history.get would have returned", async () => {
    const { threadId, userId } = await summarizedThread();
    // Budgets that cut: the byte budget drops turns, the token budget (below the bytes left) applies too.
    const env = historyEnvironment(readEnvironment({ HISTORY_MAX_BYTES: "1000", HISTORY_MAX_TOKENS: "150" }));
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model), historyEnvironment: env });
    const event = chatEvent({ threadId, userId, content: "question 31" });
    const cutOff = async (id: string) => {
      if (id === "generate-agent-ids-0") throw new StepFault("cut off");
    };
    const attempt = await execute(chatTurn, event, { beforeStep: cutOff });
    expect(attempt.stepIds).toEqual(["generate-network-id", "history.append-user-message", "generate-agent-ids-0"]);
    const begun = stepOutput(attempt.memo, BEGIN);
    expect(begun).toMatchObject({
      turnAhead: false,
      history: {
        rows: expect.any(Array),
        summaryLag: { unsummarized: expect.any(Number) },
        read: expect.any(Number),
        bytes: { maxBytes: 1000, droppedRows: expect.any(Number) },
        budget: { maxTokens: 150 },
      },
    });
    const windowed = begun.history as { rows: unknown[][]; read: number; bytes: { droppedRows: number } };
    expect(windowed.bytes.droppedRows).toBeGreaterThan(0);
    // The summary row first, read as history.get reads it.
    expect(windowed.rows[0]![0]).toBe("summary");

    // The same start memoized by an older version (no window in it): history.get reads it, as before.
    const older = attempt.memo.map((step) => {
      if (step.id !== BEGIN) return step;
      const { history: _, ...data } = step.handler() as Record<string, unknown>;
      return { ...step, handler: () => data };
    });
    const replay = await execute(chatTurn, event, { memo: older, runId: attempt.runId, beforeStep: cutOff });
    expect(replay.stepIds).toEqual([
      "generate-network-id",
      "history.append-user-message",
      "history.get",
      "generate-agent-ids-0",
    ]);
    expect(stepOutput(replay.memo, GET)).toEqual(begun.history);

    // Both finish alike: the same history sent to the model, the same load reported.
    bed.model.script({ text: "answer 31" }, { text: "answer 31" });
    const done = await execute(chatTurn, event, { memo: attempt.memo, runId: attempt.runId });
    const doneOlder = await execute(chatTurn, event, { memo: replay.memo, runId: attempt.runId });
    expect(done.error).toBeUndefined();
    expect(doneOlder.error).toBeUndefined();
    expect(done.stepIds).not.toContain("history.get");
    expect(bed.model.requests[0]!.messages).toEqual(bed.model.requests[1]!.messages);
    const load = (done.result as { history: unknown }).history;
    expect(load).toMatchObject({ from: "database", read: windowed.read, sent: windowed.rows.length });
    expect(load).toEqual((doneOlder.result as { history: unknown }).history);
  });

  it("the statement's window is readHistoryWindow's; none with a turn ahead, for a skipped turn, or unasked", async () => {
    const { threadId, userId } = await summarizedThread();
    const begin = (messageId: string, text: string, runId = `run-${randomUUID()}`, withHistory = true) =>
      beginTurn(bed.db.pool, {
        threadId,
        userId,
        message: { id: messageId, text },
        turn: { runId, kind: "chat" },
        ...(withHistory ? { history } : {}),
      });
    const first = randomUUID();
    const started = await begin(first, "question 31");
    expect(started.turnAhead).toBe(false);
    const { window: read, ...start } = started;
    expect(read).toEqual(
      await readHistoryWindow(bed.db.pool, { threadId, userId, beforeSeq: start.messageSeq, ...history }),
    );
    expect(read!.summary).toMatchObject({ coversThrough: 10, text: "The first five turns." });

    // The first turn still runs: the next message's turn has it ahead, and reads later.
    const ahead = await begin(randomUUID(), "question 32");
    expect(ahead).toMatchObject({ turnAhead: true });
    expect(ahead).not.toHaveProperty("window");
    // Unasked (policy none, a client conversation): none.
    expect(await begin(randomUUID(), "question 33", undefined, false)).not.toHaveProperty("window");
    // The first message again under another run: the first run is ahead of it.
    const again = await begin(first, "question 31");
    expect(again).toMatchObject({ status: "running", turnAhead: true });
    expect(again).not.toHaveProperty("window");
    // An answered message under another run (a re-run): skipped.
    const { rows } = await bed.db.pool.query(
      "SELECT id FROM messages WHERE thread_id = $1 AND kind = 'user' ORDER BY seq LIMIT 1",
      [threadId],
    );
    const rerun = await begin(rows[0].id, "question 1");
    expect(rerun).toMatchObject({ status: "skipped" });
    expect(rerun).not.toHaveProperty("window");
  });

  it("an edit's and a regenerate's window is what history.get reads after their statement (the path as it changed)", async () => {
    const { threadId, userId } = await summarizedThread();
    const { rows } = await bed.db.pool.query<{ id: string; seq: string }>(
      "SELECT id, seq FROM messages WHERE thread_id = $1 AND kind = 'user' ORDER BY seq",
      [threadId],
    );
    const same = async (started: Awaited<ReturnType<typeof beginTurn>>) => {
      const { window: read, ...start } = started;
      expect(start).toMatchObject({ status: "running", turnAhead: false });
      expect(read).toEqual(
        await readHistoryWindow(bed.db.pool, { threadId, userId, beforeSeq: start.messageSeq, ...history }),
      );
      return read!;
    };
    // An edit of turn 3 (inside the summary, which goes): turns 3 to 30 leave the path.
    const edited = await same(
      await beginTurn(bed.db.pool, {
        threadId,
        userId,
        message: { id: randomUUID(), text: "question 3, edited" },
        turn: { runId: `run-${randomUUID()}`, kind: "chat" },
        context: { edits: rows[2]!.id },
        history,
      }),
    );
    expect(edited.summary).toBeNull();
    expect(edited.rows.map((row) => row.content)).not.toContainEqual({ text: "question 3" });
    const regenerated = await same(
      await beginTurn(bed.db.pool, {
        threadId,
        userId,
        message: { id: rows[1]!.id, text: "question 2" },
        turn: { runId: `run-${randomUUID()}`, kind: "regenerate" },
        history,
      }),
    );
    expect(regenerated.rows.map((row) => row.content)).toContainEqual({ text: "question 1" });
  });

  it("read after the thread's lock: an earlier turn's answer committed while the statement waited is in the window", async () => {
    const { threadId, userId } = await seedThread(bed.db.pool, { turns: 2 });
    const earlier = { id: randomUUID(), runId: `run-${randomUUID()}` };
    const first = await beginTurn(bed.db.pool, {
      threadId,
      userId,
      message: { id: earlier.id, text: "question 3" },
      turn: { runId: earlier.runId, kind: "chat" },
    });
    const client = await bed.db.pool.connect();
    try {
      // The earlier turn stores its answer in a transaction that holds the thread's lock.
      await client.query("BEGIN");
      await storeAnswer(client as unknown as pg.Pool, {
        threadId,
        userId,
        runId: earlier.runId,
        messageId: earlier.id,
        messageSeq: first.messageSeq,
        variant: first.variant,
        detachLaterTurns: false,
        results: [
          {
            id: randomUUID(),
            agentName: "assistant",
            content: { output: [{ type: "text", role: "assistant", content: "answer 3" }], toolCalls: [] },
          },
        ],
      });
      const next = beginTurn(bed.db.pool, {
        threadId,
        userId,
        message: { id: randomUUID(), text: "question 4" },
        turn: { runId: `run-${randomUUID()}`, kind: "chat" },
        history,
      });
      // The next message's statement waits for the lock, then sees the answer committed.
      await waitForLockWait(bed.db.pool);
      await client.query("COMMIT");
      const started = await next;
      expect(started.turnAhead).toBe(false);
      expect(started.window!.rows.map((row) => row.content)).toContainEqual({
        output: [{ type: "text", role: "assistant", content: "answer 3" }],
        toolCalls: [],
      });
    } finally {
      client.release();
    }
  });
});

/** Until some backend waits for a lock (the next statement, behind the transaction holding the thread). */
async function waitForLockWait(db: pg.Pool) {
  for (let i = 0; i < 200; i++) {
    const { rows } = await db.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'");
    if (rows[0].n > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error("no statement waited for the thread's lock");
}
