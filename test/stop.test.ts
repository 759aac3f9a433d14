import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type pg from "pg";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { streamCompletion } from "../src/agents/streamed-completion.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { TURN_ENDED_ERROR } from "../src/functions/streaming-inference.js";
import { createTurnCancellation } from "../src/functions/turn-lifecycle.js";
import { appendRunEvents, appendEvents, readEventsAfter, type NewEvent } from "../src/history/events.js";
import { beginTurn } from "../src/history/store.js";
import { cancelTurn, failLostTurn, failTurn } from "../src/history/turns.js";
import * as runsSql from "../src/history/turn-runs-sql.js";
import * as stopSql from "../src/history/turns-sql.js";
import { deltaWriter } from "../src/stream/delta-writer.js";
import type { InferenceDelta } from "../src/history/thread-log.js";
import { streamedTexts } from "../src/stream/deltas.js";
import { execute, executeFailureHandler, type SentEvent, type Wait } from "./helpers/engine.js";
import { countingPool } from "./helpers/counting-pool.js";
import {
  chatEvent,
  conversation,
  scriptedModel,
  threadRows,
  threadWithRunningTurn as runningTurnFixture,
  turnsOf,
} from "./helpers/fixtures.js";
import { asUser, createTestApp, headersFor, tokenFor } from "./helpers/http.js";
import { gate } from "./helpers/model-server.js";
import { useTestBed } from "./helpers/test-bed.js";
import { withPausedFunction } from "./helpers/paused-function.js";

const bed = useTestBed();

let chatTurn: ReturnType<typeof createChatTurn>;
let regenerate: ReturnType<typeof createRegenerate>;
let app: ReturnType<typeof createTestApp>["app"];
let sent: SentEvent[];

beforeAll(() => {
  chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
  regenerate = createRegenerate({ db: bed.db.pool, model: scriptedModel(bed.model) });
  ({ app, sent } = createTestApp(bed.db.pool));
});
beforeEach(() => {
  sent.length = 0;
});

/** POST …/stop as a user, with a JSON body, or with none at all (undefined: as `curl -X POST` sends it). */
async function stop(threadId: string, body: unknown, userId = "user-1") {
  const request =
    body === undefined
      ? { headers: { authorization: `Bearer ${await tokenFor(userId)}` } }
      : { headers: await headersFor(userId), body: JSON.stringify(body) };
  return app.request(`/api/threads/${threadId}/stop`, { method: "POST", ...request });
}

/** A delta as in-process streaming inference logs it: row attempt = the step's attempt, key <stepId>:delta:<n>. */
const delta = (runId: string, stepId: string, attempt: number, n: number, text: string): NewEvent => ({
  key: `${stepId}:delta:${n}`,
  event: "text.delta",
  data: { runId, stepId, attempt, delta: text } satisfies InferenceDelta,
});
const stream = (threadId: string, runId: string, attempt: number, ...deltas: NewEvent[]) =>
  appendEvents(bed.db.pool, { threadId, runId, attempt, events: deltas });

// The running-turn fixture's failed attempt logged turn.retrying (test/turn-retrying.test.ts): these tests watch what follows.
const runLog = async (threadId: string, runId: string) =>
  (
    await bed.db.pool.query<{ event: string; data: Record<string, unknown> }>(
      "SELECT event, data FROM thread_events WHERE thread_id = $1 AND run_id = $2 AND event <> 'turn.retrying' ORDER BY id",
      [threadId, runId],
    )
  ).rows;
const endings = async (threadId: string, runId: string) =>
  (await runLog(threadId, runId)).filter((row) => row.event !== "text.delta");

/** Polls `done` until it holds (at most 5 seconds). */
async function until(done: () => Promise<boolean>) {
  const deadline = Date.now() + 5_000;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error("condition not reached within 5 s");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const neverWaits = async (wait: Wait): Promise<SentEvent | null> => {
  throw new Error(`the turn was not expected to wait, but waited for ${wait.match?.value}`);
};

type ShownMessage = {
  id: string;
  role: string;
  content: { output?: { content: string }[] };
  answers?: string;
  stopped?: boolean;
  variant?: number;
  turn?: { status: string } | null;
};
const messagesOf = async (threadId: string) =>
  (
    (await (await asUser(app, "user-1").get(`/api/threads/${threadId}/messages`)).json()) as {
      messages: ShownMessage[];
    }
  ).messages;

const threadWithRunningTurn = () => runningTurnFixture(bed.db.pool, chatTurn, bed.model, "Tell me a long story.");

describe("POST /api/threads/:threadId/stop", () => {
  it("mid-answer: what was streamed is stored as the answer, marked stopped; the log ends once; the run is cancelled; its late answer stores nothing; the next message is answered at once", async () => {
    const { threadId } = await conversation(chatTurn, bed.model, [["My name is Ada.", "Hello, Ada."]]);
    const event = chatEvent({ threadId, content: "Tell me a long story." });
    const messageId = event.data.messageId;
    const runId = `run-${randomUUID()}`;
    bed.model.script({ text: "Once upon a time there was a compiler. The end." });

    let stopped: Response | undefined;
    const run = await execute(chatTurn, event, {
      runId,
      beforeStep: async (id) => {
        // While the model answers, the streaming writer logs deltas: a first attempt that failed
        // midway (superseded), the retry's two batches. Another run's and a chunk-shaped delta are not this answer.
        if (id === "assistant") {
          await stream(threadId, runId, 0, delta(runId, "assistant", 0, 0, "Once upon a tim"));
          await stream(
            threadId,
            runId,
            1,
            delta(runId, "assistant", 1, 0, "Once upon"),
            delta(runId, "assistant", 1, 1, " a time"),
          );
          await stream(threadId, "another-run", 0, delta("another-run", "assistant", 0, 0, "Elsewhere"));
          await appendEvents(bed.db.pool, {
            threadId,
            runId,
            attempt: 0,
            events: [
              {
                key: "publish-9:text.delta",
                event: "text.delta",
                data: { partId: "p", messageId: "m", delta: "chunk" },
              },
            ],
          });
        }
        // The user stops while the inference step still executes: Inngest's cancellation cannot end
        // that step, so the run goes on to store the answer it got.
        if (id === "history.append-results") stopped = await stop(threadId, {});
      },
    });

    expect(stopped!.status).toBe(202);
    expect(await stopped!.json()).toEqual({
      threadId,
      runId,
      messageId,
      variant: 1,
      stopped: true,
      answerStored: true,
      announced: true,
    });
    expect(sent).toEqual([
      {
        id: `turn-stop-${runId}`,
        name: "chat/turn.stop.requested",
        data: { threadId, userId: "user-1", runId, messageId },
      },
      {
        id: `turn-finished-${runId}`,
        name: "threadline/turn.finished",
        data: { threadId, runId, messageId, status: "stopped" },
      },
    ]);

    // The run's late answer changed nothing; it reports the stop (its turn.finished carries the same id, which Inngest drops).
    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ status: "stopped", answer: "Once upon a time there was a compiler. The end." });
    expect(run.sentEvents).toEqual([
      expect.objectContaining({
        id: `turn-finished-${runId}`,
        data: { threadId, runId, messageId, status: "stopped" },
      }),
    ]);
    expect((await threadRows(bed.db.pool, threadId)).filter((row) => row.answers === messageId)).toHaveLength(1);

    const shown = await messagesOf(threadId);
    expect(shown.slice(-2)).toMatchObject([
      { id: messageId, role: "user", turn: { status: "stopped", runId, error: null } },
      {
        role: "assistant",
        answers: messageId,
        variant: 1,
        stopped: true,
        content: { output: [{ type: "text", role: "assistant", content: "Once upon a time" }], toolCalls: [] },
      },
    ]);
    expect(shown.filter((m) => m.role === "assistant").map((m) => m.stopped ?? false)).toEqual([false, true]);
    const listed = (await (await asUser(app, "user-1").get(`/api/threads/${threadId}`)).json()) as {
      latestTurnStatus: string;
    };
    expect(listed.latestTurnStatus).toBe("stopped");

    expect(await endings(threadId, runId)).toEqual([
      { event: "turn.stopped", data: { runId, messageId, variant: 1, answerStored: true } },
      { event: "stream.ended", data: { scope: "network", status: "stopped", runId, messageId, variant: 1 } },
    ]);

    bed.model.script({ text: "A story about a compiler." });
    const next = await execute(chatTurn, chatEvent({ threadId, content: "What was it about?" }), { waits: neverWaits });
    expect(next.error).toBeUndefined();
    expect(next.result).toMatchObject({ status: "completed" });
    expect(next.stepIds.filter((id) => id.startsWith("history.wait-for-turn"))).toEqual([]);
    expect(bed.model.requests.at(-1)!.messages.slice(-3)).toEqual([
      { role: "user", content: "Tell me a long story." },
      { role: "assistant", content: "Once upon a time" },
      { role: "user", content: "What was it about?" },
    ]);
  });

  it("before anything was streamed: the turn is stopped without an answer; a repeated stop is a 409 that writes and sends nothing; the run's retry, failure and cancellation change nothing", async () => {
    const { threadId, event, attempt } = await threadWithRunningTurn();
    const messageId = event.data.messageId;

    // Without a body: the turn the thread is answering.
    const first = await stop(threadId, undefined);
    expect(first.status).toBe(202);
    expect(await first.json()).toMatchObject({ runId: attempt.runId, messageId, stopped: true, answerStored: false });
    const log = await endings(threadId, attempt.runId);
    expect(log).toEqual([
      { event: "turn.stopped", data: { runId: attempt.runId, messageId, variant: 1, answerStored: false } },
      {
        event: "stream.ended",
        data: { scope: "network", status: "stopped", runId: attempt.runId, messageId, variant: 1 },
      },
    ]);
    expect((await messagesOf(threadId)).slice(-1)).toMatchObject([
      { id: messageId, role: "user", turn: { status: "stopped" } },
    ]);

    sent.length = 0;
    const again = await stop(threadId, {});
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({ code: "no_running_turn" });
    expect(sent).toEqual([]);

    // The run's retry (had its cancellation not landed) gets the answer but stores none.
    bed.model.script({ text: "Once upon a time, fully." });
    const retried = await execute(chatTurn, event, { memo: attempt.memo, runId: attempt.runId });
    expect(retried.result).toMatchObject({ status: "stopped" });
    await executeFailureHandler(chatTurn, {
      runId: attempt.runId,
      event,
      error: { name: "Error", message: "late failure" },
    });
    const cancelled = await execute(createTurnCancellation({ db: bed.db.pool }), {
      name: "inngest/function.cancelled",
      data: { function_id: "threadline-chat-turn", run_id: attempt.runId },
    });
    expect(cancelled.result).toMatchObject({ status: "no running turn" });
    expect(cancelled.sentEvents).toEqual([]);

    expect(await turnsOf(bed.db.pool, messageId)).toMatchObject([{ status: "stopped", error: null }]);
    expect((await threadRows(bed.db.pool, threadId)).filter((row) => row.answers === messageId)).toEqual([]);
    expect(await endings(threadId, attempt.runId)).toEqual(log);
  });

  it("racing the run's failure being recorded: no deadlock, whichever comes first wins (here the failure: the stop is a 409)", async () => {
    const { threadId, attempt } = await threadWithRunningTurn();
    // Holds the failure's statement right after it updated the turn row (a test-only trigger), so
    // the stop arrives exactly between its two locks: the turn row and the thread's row.
    const holder = await bed.db.pool.connect();
    await bed.db.pool.query(`
      CREATE FUNCTION pg_temp_hold_failure() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NEW; END $$;
      CREATE TRIGGER hold_failure BEFORE UPDATE ON turns FOR EACH ROW WHEN (NEW.status = 'failed') EXECUTE FUNCTION pg_temp_hold_failure();`);
    const waiting = async (where: string) =>
      until(
        async () =>
          (await bed.db.pool.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND ${where}`))
            .rowCount === 1,
      );
    try {
      await holder.query("SELECT pg_advisory_lock(4242)");
      const failure = failTurn(bed.db.pool, attempt.runId, "The model provider answered HTTP 503").then(
        () => "recorded",
        (error: Error) => error.message,
      );
      await waiting("wait_event_type = 'Lock' AND wait_event = 'advisory' AND query LIKE '%failed%'");
      const stopped = stop(threadId, {}).then((response) => response.status);
      await waiting("wait_event_type = 'Lock' AND query LIKE '%threadline_stop_turn%'");
      await holder.query("SELECT pg_advisory_unlock(4242)");
      expect(await Promise.all([failure, stopped])).toEqual(["recorded", 409]);
    } finally {
      holder.release();
      await bed.db.pool.query("DROP TRIGGER hold_failure ON turns; DROP FUNCTION pg_temp_hold_failure()");
    }
    expect(
      await turnsOf(bed.db.pool, (await endings(threadId, attempt.runId))[0]!.data.messageId as string),
    ).toMatchObject([{ status: "failed" }]);
    expect((await endings(threadId, attempt.runId)).map((row) => [row.event, row.data.status])).toEqual([
      ["turn.failed", undefined],
      ["stream.ended", "failed"],
    ]);
  });

  it("a turn already waiting for the stopped one is released by the stop's turn.finished, in its first wait", async () => {
    const { threadId, attempt } = await threadWithRunningTurn();
    const waits: Wait[] = [];
    bed.model.script({ text: "Then the end." });
    const later = await execute(chatTurn, chatEvent({ threadId, content: "And then?" }), {
      waits: async (wait) => {
        waits.push(wait);
        expect((await stop(threadId, {})).status).toBe(202);
        // What Inngest would deliver to this wait: an event the stop sent, not the round's timeout.
        const released = sent.find((e) => e.name === wait.event && e.data[wait.match!.field] === wait.match!.value);
        expect(released?.data).toMatchObject({ status: "stopped" });
        return released ?? null;
      },
    });
    expect(waits.map((w) => w.match?.value)).toEqual([attempt.runId]);
    expect(later.result).toMatchObject({ status: "completed", answer: "Then the end." });
  });

  it("with AgentKit's chunks logged (EVENT_LOG_CHUNKS): the run's chunks after the stop are not logged; the stop's ending stays last", async () => {
    const chunkedTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model), eventLog: true });
    const { threadId } = await conversation(chatTurn, bed.model, [["Say hi", "Hi"]]);
    bed.model.script({ text: "A story." });
    let inferred = false;
    let stopped: Response | undefined;
    const run = await execute(chunkedTurn, chatEvent({ threadId, content: "Tell me a story." }), {
      beforeStep: async (id) => {
        if (id === "assistant") inferred = true;
        else if (inferred && id.startsWith("publish-") && !stopped) stopped = await stop(threadId, {});
      },
    });
    expect(stopped!.status).toBe(202);
    expect(run.result).toMatchObject({ status: "stopped" });
    const events = (await runLog(threadId, run.runId)).map((row) => row.event);
    expect(events.slice(0, 2)).toEqual(["run.started", "run.started"]);
    expect(events.slice(-2)).toEqual(["turn.stopped", "stream.ended"]);
    expect(events.filter((event) => event === "part.completed" || event === "stream.ended")).toEqual(["stream.ended"]);
  });

  it("costs two statements: the lookup of the running turn and the stop; a stop with nothing running, the lookup alone", async () => {
    const { threadId } = await threadWithRunningTurn();
    const counting = countingPool(bed.db.pool);
    const counted = createTestApp(counting.pool).app;
    const post = async () =>
      counted.request(`/api/threads/${threadId}/stop`, {
        method: "POST",
        headers: await headersFor("user-1"),
        body: "{}",
      });
    expect((await post()).status).toBe(202);
    expect(counting.queries).toEqual([runsSql.selectRunningTurn, stopSql.stopTurn]);
    counting.queries.length = 0;
    expect((await post()).status).toBe(409);
    expect(counting.queries).toEqual([runsSql.selectRunningTurn]);
  });

  it("stops only the turn of the message named: another message's id is a 409 and leaves the running turn alone", async () => {
    const { threadId, event } = await threadWithRunningTurn();
    const [answered] = (await messagesOf(threadId)).filter((m) => m.role === "user");

    const refused = await stop(threadId, { messageId: answered!.id });
    expect(refused.status).toBe(409);
    expect(await turnsOf(bed.db.pool, event.data.messageId)).toMatchObject([{ status: "running" }]);

    const named = await stop(threadId, { messageId: event.data.messageId });
    expect(named.status).toBe(202);
    expect(await turnsOf(bed.db.pool, event.data.messageId)).toMatchObject([{ status: "stopped" }]);
  });

  it("a regenerate stopped mid-answer: its partial answer becomes the current variant, the earlier answer stays listable", async () => {
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, [["Say hi", "Hi"]]);
    const runId = `run-${randomUUID()}`;
    bed.model.script({ text: "Hello there, friend." });
    const run = await execute(
      regenerate,
      { name: "chat/message.regenerate", data: { threadId, messageId: messageIds[0]!, userId: "user-1" } },
      {
        runId,
        beforeStep: async (id) => {
          if (id === "assistant") await stream(threadId, runId, 0, delta(runId, "assistant", 0, 0, "Hello"));
          if (id === "history.append-results") expect((await stop(threadId, {})).status).toBe(202);
        },
      },
    );
    expect(run.result).toMatchObject({ status: "stopped" });

    const variants = (await (
      await asUser(app, "user-1").get(`/api/threads/${threadId}/messages/${messageIds[0]}/variants`)
    ).json()) as {
      variants: {
        variant: number;
        current: boolean;
        stopped?: boolean;
        results: { content: { output: { content: string }[] } }[];
      }[];
    };
    expect(
      variants.variants.map((v) => [
        v.variant,
        v.current,
        v.stopped ?? false,
        v.results[0]!.content.output[0]!.content,
      ]),
    ).toEqual([
      [1, false, false, "Hi"],
      [2, true, true, "Hello"],
    ]);
  });

  it("another user's thread answers 404 exactly like an unknown one, and nothing changes", async () => {
    const { threadId, event } = await threadWithRunningTurn();
    const foreign = await stop(threadId, {}, "user-2");
    const unknown = await stop(randomUUID(), {});
    expect(foreign.status).toBe(404);
    expect(unknown.status).toBe(404);
    expect(await foreign.json()).toEqual(await unknown.json());
    expect(await turnsOf(bed.db.pool, event.data.messageId)).toMatchObject([{ status: "running" }]);
    expect(sent).toEqual([]);
  });

  it("the turn functions cancel their run on a stop of the same user message", () => {
    for (const fn of [chatTurn, regenerate]) {
      const { cancelOn } = (fn as unknown as { opts: { cancelOn: { event: { name: string }; if: string }[] } }).opts;
      // (The deletion entries beside it are test/deletion.test.ts's.)
      const stops = cancelOn.filter((c) => c.event.name === "chat/turn.stop.requested");
      expect(stops.map((c) => [c.event.name, c.if])).toEqual([
        ["chat/turn.stop.requested", "async.data.messageId == event.data.messageId"],
      ]);
    }
  });
});

describe("a streaming turn (INFERENCE=stream) stopped mid-answer", () => {
  it("stores the text logged before the stop as its answer; the model's later text is never logged; the run ends at the inference, non-retriably; the next message is answered at once", async () => {
    const streamingTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model), inference: "stream" });
    const { threadId } = await conversation(chatTurn, bed.model, [["My name is Ada.", "Hello, Ada."]]);
    const event = chatEvent({ threadId, content: "Tell me a long story." });
    const held = gate();
    bed.model.script({
      text: "Once upon a time there was a compiler.",
      stream: { chunks: ["Once upon", " a time", " there was", " a compiler."], holdAfter: { chunks: 2, gate: held } },
    });

    const running = execute(streamingTurn, event);
    await held.reached;
    await until(
      async () => streamedTexts(await readEventsAfter(bed.db.pool, threadId, 0, 1_000))[0]?.text === "Once upon a time",
    );
    const stopped = await stop(threadId, {});
    expect(stopped.status).toBe(202);
    const { runId } = (await stopped.json()) as { runId: string };
    // The model goes on; its next text finds the turn stopped, and the run ends there.
    held.release();
    const run = await running;
    expect(run.runId).toBe(runId);
    expect((run.error as Error).message).toBe(TURN_ENDED_ERROR);
    expect(bed.model.requests).toHaveLength(1);

    const log = await runLog(threadId, runId);
    expect(log.map((row) => row.event)).toEqual([
      ...log.filter((row) => row.event === "text.delta").map(() => "text.delta"),
      "turn.stopped",
      "stream.ended",
    ]);
    expect(streamedTexts(await readEventsAfter(bed.db.pool, threadId, 0, 1_000), runId).map((t) => t.text)).toEqual([
      "Once upon a time",
    ]);
    expect((await messagesOf(threadId)).slice(-2)).toMatchObject([
      { id: event.data.messageId, turn: { status: "stopped", runId } },
      { role: "assistant", stopped: true, content: { output: [{ content: "Once upon a time" }] } },
    ]);

    // Inngest calls the onFailure handler of the run it failed: the stopped turn stays as it is.
    await executeFailureHandler(streamingTurn, {
      runId,
      event,
      error: { name: "NonRetriableError", message: TURN_ENDED_ERROR },
    });
    expect(await turnsOf(bed.db.pool, event.data.messageId)).toMatchObject([{ status: "stopped", error: null }]);
    expect(await endings(threadId, runId)).toHaveLength(2);

    bed.model.script({ text: "It was about a compiler." });
    const next = await execute(streamingTurn, chatEvent({ threadId, content: "What was it about?" }), {
      waits: neverWaits,
    });
    expect(next.result).toMatchObject({ status: "completed", answer: "It was about a compiler." });
    expect(bed.model.requests.at(-1)!.messages.slice(-2)).toEqual([
      { role: "assistant", content: "Once upon a time" },
      { role: "user", content: "What was it about?" },
    ]);
  });

  it("the delta writer: a batch that finds the turn stopped is not written, and `stopped` aborts", async () => {
    const { threadId, attempt } = await threadWithRunningTurn();
    const failures: unknown[] = [];
    const writer = deltaWriter(
      bed.db.pool,
      { threadId, runId: attempt.runId, stepId: "assistant", attempt: 1 },
      (error) => failures.push(error),
    );
    writer.push("Once");
    await writer.finish();
    expect(writer.ended.aborted).toBe(false);
    expect((await stop(threadId, {})).status).toBe(202);

    const late = deltaWriter(
      bed.db.pool,
      { threadId, runId: attempt.runId, stepId: "assistant", attempt: 1 },
      (error) => failures.push(error),
    );
    late.push(" upon a time");
    await late.finish();
    expect(late.ended.aborted).toBe(true);
    // A refused batch is a stop, not a failed write.
    expect(failures).toEqual([]);
    expect((await runLog(threadId, attempt.runId)).map((row) => row.event)).toEqual([
      "text.delta",
      "turn.stopped",
      "stream.ended",
    ]);
  });

  it("a model call whose signal aborts ends at once: the provider's connection is closed mid-stream", async () => {
    const server = createServer();
    const connectionClosed = new Promise<void>((resolve) => {
      server.once("request", (_request, response) => {
        response.writeHead(200, { "content-type": "text/event-stream" });
        response.write(
          `data: ${JSON.stringify({ choices: [{ index: 0, delta: { role: "assistant", content: "Once" } }] })}\n\n`,
        );
        // Never ends by itself: only the caller's abort closes it.
        response.on("close", () => resolve());
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const stopped = new AbortController();
    const call = streamCompletion({
      model: { url: `http://127.0.0.1:${port}/v1/chat/completions`, authKey: "test-key", format: "openai-chat" },
      body: { model: "scripted-model", messages: [] },
      signal: stopped.signal,
      onText: () => stopped.abort(new Error("stopped by the user")),
    });
    // The call fails with the signal's reason, not as a broken stream.
    await expect(call).rejects.toThrow("stopped by the user");
    await connectionClosed;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
});

describe("the streaming writer's delta appends (appendRunEvents)", () => {
  it("are logged while the turn runs; a batch racing a stop waits for it, then is refused (ended: true) and nothing follows the stop's ending", async () => {
    const { threadId, event, attempt } = await threadWithRunningTurn();
    const runId = attempt.runId;
    expect(
      await appendRunEvents(bed.db.pool, {
        threadId,
        runId,
        attempt: 0,
        events: [delta(runId, "assistant", 0, 0, "Once")],
      }),
    ).toMatchObject({ ended: false });

    // The stop's statement holds the thread's lock (its transaction left open) while a batch arrives.
    const client = await bed.db.pool.connect();
    try {
      await client.query("BEGIN");
      await client.query("SELECT * FROM threadline_stop_turn($1, 'user-1', $2, $3, 'assistant')", [
        threadId,
        runId,
        randomUUID(),
      ]);
      const racing = appendRunEvents(bed.db.pool, {
        threadId,
        runId,
        attempt: 0,
        events: [delta(runId, "assistant", 0, 1, " upon")],
      });
      await until(
        async () =>
          (
            await bed.db.pool.query(
              "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%threadline_append_run_events%'",
            )
          ).rowCount === 1,
      );
      await client.query("COMMIT");
      expect(await racing).toEqual({ lastId: null, ended: true });
    } finally {
      client.release();
    }

    const log = await runLog(threadId, runId);
    expect(log.map((row) => row.event)).toEqual(["text.delta", "turn.stopped", "stream.ended"]);
    expect((await messagesOf(threadId)).at(-1)).toMatchObject({
      role: "assistant",
      answers: event.data.messageId,
      stopped: true,
      content: { output: [{ content: "Once" }] },
    });
  });

  it("a cancelled run's still-executing inference logs nothing after the cancellation's ending, and learns it (ended: true)", async () => {
    const { threadId, attempt } = await threadWithRunningTurn();
    const runId = attempt.runId;
    expect(await cancelTurn(bed.db.pool, runId)).not.toBeNull();
    expect(
      await appendRunEvents(bed.db.pool, {
        threadId,
        runId,
        attempt: 0,
        events: [delta(runId, "assistant", 0, 0, "Too late")],
      }),
    ).toEqual({ lastId: null, ended: true });
    expect((await runLog(threadId, runId)).map((row) => row.event)).toEqual(["turn.cancelled", "stream.ended"]);
  });

  it.each([
    { status: "cancelled", end: (pool: pg.Pool, runId: string) => cancelTurn(pool, runId) },
    { status: "failed", end: (pool: pg.Pool, runId: string) => failLostTurn(pool, runId, "presumed lost") },
  ])(
    "a batch that read the turn running while it was being $status logs nothing after that ending",
    async ({ status, end }) => {
      // A cancellation or failure share-locks the thread as a batch does, so the thread's lock does
      // not order them: a batch paused between its read of the turn and its append while the turn ends.
      const pause = { name: "threadline_append_run_events", at: "  last_id := CASE", when: "p_run_id LIKE 'paused-%'" };
      await withPausedFunction(pause, async ({ pool, pools, reachedPause, settled, release }) => {
        const threadId = randomUUID();
        const runId = `paused-${threadId}`;
        await beginTurn(pool, {
          threadId,
          userId: "user-1",
          message: { id: threadId, text: "Tell me a long story." },
          turn: { runId, kind: "chat" },
        });
        const batch = appendRunEvents(pools[0], {
          threadId,
          runId,
          attempt: 0,
          events: [delta(runId, "assistant", 0, 0, "Once")],
        });
        await reachedPause();
        // The ending either commits at once or waits for the paused batch: either way it has run.
        const ending = end(pools[1], runId);
        await settled(ending);
        await release();
        await Promise.all([batch, ending]);

        const log = await pool.query<{ event: string }>(
          "SELECT event FROM thread_events WHERE run_id = $1 AND event <> 'turn.retrying' ORDER BY id",
          [runId],
        );
        expect(log.rows.map((row) => row.event)).toEqual(["text.delta", `turn.${status}`, "stream.ended"]);
      });
    },
  );
});

describe("the partial answer's text", () => {
  it("a stop while only whitespace had streamed stores no answer (an empty assistant message breaks some providers)", async () => {
    const { threadId, event, attempt } = await threadWithRunningTurn();
    const runId = attempt.runId;
    await appendRunEvents(bed.db.pool, {
      threadId,
      runId,
      attempt: 0,
      events: [delta(runId, "assistant", 0, 0, "\n\n  ")],
    });
    const answer = await stop(threadId, {});
    expect(answer.status).toBe(202);
    expect(await answer.json()).toMatchObject({ stopped: true, answerStored: false });
    const shown = await messagesOf(threadId);
    // The earlier turn's answer only: nothing answers the stopped message, whose turn shows stopped.
    expect(shown.filter((m) => m.role === "assistant")).toHaveLength(1);
    expect(shown.filter((m) => m.role === "assistant").map((m) => m.answers)).not.toContain(event.data.messageId);
    expect(shown.find((m) => m.id === event.data.messageId)?.turn).toMatchObject({ status: "stopped" });
  });

  it("follows the readers' rule (streamedTexts): per step its latest attempt, in id order; steps in the order they started", async () => {
    const threadId = randomUUID();
    await bed.db.pool.query("INSERT INTO threads (id, user_id) VALUES ($1, 'user-1')", [threadId]);
    const runId = "folded-run";
    await stream(
      threadId,
      runId,
      0,
      delta(runId, "assistant", 0, 0, "Let me check"),
      delta(runId, "assistant", 0, 1, " the time."),
    );
    await stream(threadId, runId, 0, delta(runId, "reviewer", 0, 0, "Draft"));
    await stream(threadId, runId, 1, delta(runId, "reviewer", 1, 0, "Reviewed"));
    // A late batch of the failed attempt, after its retry began: dropped.
    await stream(threadId, runId, 0, delta(runId, "reviewer", 0, 1, " late"));
    await stream(threadId, runId, 1, delta(runId, "reviewer", 1, 1, ": fine."));
    await stream(threadId, runId, 0, delta(runId, "empty", 0, 0, ""));
    await stream(threadId, "other-run", 0, delta("other-run", "assistant", 0, 0, "Not this run."));

    const { rows } = await bed.db.pool.query<{ texts: string[] }>("SELECT threadline_streamed_texts($1, $2) AS texts", [
      threadId,
      runId,
    ]);
    const read = streamedTexts(await readEventsAfter(bed.db.pool, threadId, 0, 100), runId).filter(
      (t) => t.text !== "",
    );
    expect(rows[0]!.texts).toEqual(read.map((t) => t.text));
    expect(rows[0]!.texts).toEqual(["Let me check the time.", "Reviewed: fine."]);
  });
});
