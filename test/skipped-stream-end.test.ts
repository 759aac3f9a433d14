import { randomUUID } from "node:crypto";
import type pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { inngest } from "../inngest.config.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createModelInference } from "../src/functions/model-inference.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { CHAT_TURN_ID, createTurnCancellation, REGENERATE_ID } from "../src/functions/turn-lifecycle.js";
import { resultId } from "../src/history/ids.js";
import { beginTurnName } from "../src/history/store-sql.js";
import { beginTurn, storeAnswer } from "../src/history/store.js";
import { selectEarlierUnfinishedTurnName } from "../src/history/turns-sql.js";
import { until, within } from "./helpers/deadline.js";
import { headersFor } from "./helpers/http.js";
import { openEventStream, uiChunks } from "./helpers/sse.js";
import { useStandInBed } from "./helpers/stand-in-bed.js";

/**
 * Two narrow windows in which a turn was recorded as skipped while nothing ended its stream, so a
 * client following it (GET /api/threads/:id/events, useChat's stream) waited for ever: a run
 * skipped while it waited and cancelled before it logged the skip, and a regenerate whose message
 * left the current path after its run loaded it, before its turn began. The app as deployed, its
 * functions run by the engine stand-in over the serve protocol.
 */
const CHAT_TURN = `${inngest.id}-${CHAT_TURN_ID}`;
const REGENERATE = `${inngest.id}-${REGENERATE_ID}`;
const userId = "user-1";
/**
 * A step's statement held where a test wants a cancellation or another writer to land: the
 * statement named `name` (a prepared statement of src/history) waits, before it is sent or once
 * its result `matches`, until the test releases it. Armed by the test, once.
 */
type Pause = {
  name: string;
  phase: "before" | "after";
  matches?: (row: Record<string, unknown> | undefined) => boolean;
};
type ArmedPause = Pause & { reached: () => void; released: Promise<void> };

/** The app's pool, with a pause the test arms: `arm` gives `waiting` (a statement waits at it) and `release`. */
function pausingPool(pool: pg.Pool) {
  let armed: ArmedPause | undefined;
  const releases: (() => void)[] = [];
  const wait = async () => {
    const pause = armed!;
    armed = undefined;
    pause.reached();
    await pause.released;
  };
  const query = async (...args: unknown[]) => {
    const named = (args[0] as { name?: string } | undefined)?.name;
    if (armed?.phase === "before" && named === armed.name) await wait();
    const result = await (pool.query as (...a: unknown[]) => Promise<pg.QueryResult>)(...args);
    if (armed?.phase === "after" && named === armed.name && (armed.matches?.(result.rows[0]) ?? true)) await wait();
    return result;
  };
  return {
    pool: new Proxy(pool, {
      get: (target, property) => (property === "query" ? query : Reflect.get(target, property, target)),
    }),
    arm: (pause: Pause) => {
      let reached!: () => void;
      let release!: () => void;
      const waiting = new Promise<void>((resolve) => (reached = resolve));
      armed = { ...pause, reached, released: new Promise<void>((resolve) => (release = resolve)) };
      releases.push(release);
      return { waiting, release };
    },
    /** After a test: nothing armed, nothing left waiting (a failed test's run ends). */
    disarm: () => {
      armed = undefined;
      for (const release of releases.splice(0)) release();
    },
  };
}
let chatPool: ReturnType<typeof pausingPool>;
let regeneratePool: ReturnType<typeof pausingPool>;

// A wait's round lasts 0.5 s of real time: the run waited for is not presumed lost during a test.
const bed = useStandInBed(
  ({ db, model }) => {
    chatPool = pausingPool(db);
    regeneratePool = pausingPool(db);
    return [
      createChatTurn({ db: chatPool.pool, model }),
      createModelInference({ model }),
      createRegenerate({ db: regeneratePool.pool, model }),
      createTurnCancellation({ db }),
    ];
  },
  { msPerSecond: 50 },
);

afterEach(() => {
  chatPool.disarm();
  regeneratePool.disarm();
});

/** The thread's event log, followed as a client does, from its beginning. */
const follow = (threadId: string) =>
  openEventStream({ request: (path, init) => fetch(`${bed.url}${path}`, init) }, threadId);

describe("a run skipped while it waited, cancelled before it logged the skip", () => {
  it("ends its stream as skipped, once: a client following the thread sees it end", async () => {
    // The thread answers message M (a turn whose run is elsewhere); a second run of M (a rerun
    // while the first still answers, a duplicate delivery) waits behind it.
    const threadId = randomUUID();
    const messageId = threadId;
    const first = `first-${messageId}`;
    const begun = await beginTurn(bed.db.pool, {
      threadId,
      userId,
      message: { id: messageId, text: "Tell me a fact." },
      turn: { runId: first, kind: "chat" },
    });
    const log = await follow(threadId);
    try {
      await bed.engine.send({
        name: "chat/message.sent",
        data: { threadId, messageId, content: "Tell me a fact.", userId, busy: "enqueue" },
      });
      const second = await bed.engine.runFor((r) => r.fnId === CHAT_TURN && r.event.data.messageId === messageId);
      await until(
        () => second.order.some((step) => step.id === "history.find-earlier-turn"),
        "the second run found the first ahead of it",
      );

      // The first run stores its answer and announces it; the second's next lookup finds the
      // message answered, records its turn as skipped, and is cancelled while that step executes.
      const skip = chatPool.arm({
        name: selectEarlierUnfinishedTurnName,
        phase: "after",
        matches: (row) => row?.skipped === true,
      });
      await storeAnswer(bed.db.pool, {
        threadId,
        userId,
        runId: first,
        messageId,
        messageSeq: begun.messageSeq,
        variant: begun.variant,
        detachLaterTurns: false,
        results: [
          {
            id: resultId(messageId, begun.variant, 0),
            agentName: "assistant",
            content: {
              output: [{ type: "text", role: "assistant", content: "Octopuses have three hearts." }],
              toolCalls: [],
            },
          },
        ],
      });
      await bed.engine.send({
        id: `turn-finished-${first}`,
        name: "threadline/turn.finished",
        data: { threadId, runId: first, messageId, status: "completed" },
      });
      await within(skip.waiting, "the second run's lookup finds the message answered");
      bed.engine.cancel(second);
      const handler = await bed.cancellationHandled(second);
      skip.release();
      await within(second.ended, "the second run ends");

      await until(
        () => log.received.some((e) => e.event === "stream.ended" && e.data.runId === second.runId),
        "the second run's stream.ended reaches the client",
      );
      expect(
        log.received.filter((e) => e.data.runId === second.runId).map(({ event, data }) => ({ event, data })),
      ).toEqual([
        {
          event: "turn.skipped",
          data: { runId: second.runId, reason: "the message was answered by another run while this one waited" },
        },
        { event: "stream.ended", data: { scope: "network", status: "skipped", runId: second.runId, messageId } },
      ]);
      const turns = await bed.db.pool.query("SELECT status FROM turns WHERE run_id = $1", [second.runId]);
      expect(turns.rows).toEqual([{ status: "skipped" }]);
      // The handler running again (Inngest retrying it) writes nothing.
      await within(bed.engine.rerun(handler).ended, "the rerun handler ends");
      expect(await bed.runRows(second.runId)).toEqual([
        { event: "turn.skipped", status: null },
        { event: "stream.ended", status: "skipped" },
      ]);
    } finally {
      await log.close();
    }
  });
});

describe("a regenerate whose message leaves the current path after its run loaded it, before its turn began", () => {
  /** Sends `text` and reads the answer's stream to its end: it must complete. */
  async function answered(threadId: string, messageId: string, text: string, answer: string, edits?: string) {
    bed.model.script({ text: answer });
    const response = await bed.send(threadId, messageId, text, { edits });
    expect(response.status).toBe(200);
    const read = await within(uiChunks(response), "the answer's UI message stream ends");
    expect(read.at(-2)).toMatchObject({ type: "finish", messageMetadata: { status: "completed" } });
  }

  it("ends useChat's stream and the thread's stream as skipped, once; the model is not asked", async () => {
    const threadId = randomUUID();
    const messageId = randomUUID();
    await answered(threadId, messageId, "Capital of France?", "Paris.");

    // The run's first step loads the message (on the path), its next one begins the turn: held just before.
    const begin = regeneratePool.arm({ name: beginTurnName, phase: "before" });
    const regenerate = await fetch(`${bed.url}/api/ui/chat`, {
      method: "POST",
      headers: await headersFor(userId),
      body: JSON.stringify({
        id: threadId,
        trigger: "regenerate-message",
        messages: [{ id: messageId, role: "user", parts: [{ type: "text", text: "Capital of France?" }] }],
        messageId,
      }),
    });
    expect(regenerate.status).toBe(200);
    const run = await bed.engine.runFor((r) => r.fnId === REGENERATE);
    await within(begin.waiting, "the regenerate is about to begin its turn");
    // Meanwhile the message is edited: it leaves the current path.
    await answered(threadId, randomUUID(), "Capital of Italy?", "Rome.", messageId);
    const log = await follow(threadId);
    try {
      bed.model.reset();
      begin.release();

      const read = await within(uiChunks(regenerate), "the regenerate's UI message stream ends");
      // As for any skipped turn, the answer the message has is sent whole: nothing new was made.
      expect(read).toContainEqual(expect.objectContaining({ type: "text-delta", delta: "Paris." }));
      expect(read.at(-2)).toMatchObject({ type: "finish", messageMetadata: { status: "skipped" } });
      await until(
        () => log.received.some((e) => e.event === "stream.ended" && e.data.runId === run.runId),
        "the regenerate's stream.ended reaches the client",
      );
      expect(
        log.received.filter((e) => e.data.runId === run.runId).map(({ event, data }) => ({ event, data })),
      ).toEqual([
        {
          event: "turn.skipped",
          data: { runId: run.runId, reason: "the message is no longer on the thread's current path" },
        },
        { event: "stream.ended", data: { scope: "network", status: "skipped", runId: run.runId, messageId } },
      ]);
      await within(run.ended, "the regenerate's run ends");
      expect(run.output).toMatchObject({ status: "skipped" });
      expect(bed.model.requests).toHaveLength(0);

      // The event run again (a rerun, from the start or from a later step) logs nothing: the re-run rule.
      await within(bed.engine.rerun(run).ended, "the whole rerun ends");
      const begun = run.order.findIndex((step) => step.id === "history.append-user-message");
      await within(bed.engine.rerun(run, run.order[begun + 1]!.id).ended, "the rerun from a later step ends");
      const logged = await bed.db.pool.query<{ run_id: string; event: string }>(
        "SELECT run_id, event FROM thread_events WHERE thread_id = $1 AND run_id IN (SELECT run_id FROM turns WHERE kind = 'regenerate') ORDER BY id",
        [threadId],
      );
      expect(logged.rows).toEqual([
        { run_id: run.runId, event: "turn.skipped" },
        { run_id: run.runId, event: "stream.ended" },
      ]);
    } finally {
      await log.close();
    }
  });
});
