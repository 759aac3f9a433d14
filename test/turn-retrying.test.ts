import { afterEach, describe, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createModelInference } from "../src/functions/model-inference.js";
import { TURN_RETRIES } from "../src/functions/turn-lifecycle.js";
import { recordTurnRetrying } from "../src/history/turn-retrying.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, scriptedModel, turnsOf } from "./helpers/fixtures.js";
import { createTestApp, asUser } from "./helpers/http.js";
import { startLiveEngine, type LiveEngine } from "./helpers/live-engine.js";
import { useTestBed } from "./helpers/test-bed.js";

/**
 * While a turn retries, clients see it: a turn.retrying event per failed attempt in the thread's
 * log, and the messages API's turn status `retrying` with the cause, never after the turn ended.
 */
const bed = useTestBed();
let live: LiveEngine | undefined;
afterEach(async () => {
  await live?.close();
  live = undefined;
});

const OVERLOADED = {
  status: 503,
  body: { error: { message: "The engine is currently overloaded", type: "server_error" } },
};
const CAUSE = "The model provider answered HTTP 503: The engine is currently overloaded (server_error)";

const logOf = async (threadId: string) =>
  (
    await bed.db.pool.query<{ event: string; run_id: string; data: Record<string, unknown> }>(
      "SELECT event, run_id, data FROM thread_events WHERE thread_id = $1 ORDER BY id",
      [threadId],
    )
  ).rows;

/** The user message's turn as the messages API shows it. */
async function shownTurn(threadId: string) {
  const { app } = createTestApp(bed.db.pool);
  const page = (await (await asUser(app, "user-1").get(`/api/threads/${threadId}/messages`)).json()) as {
    messages: { role: string; turn?: { status: string; error: string | null } }[];
  };
  return page.messages.find((m) => m.role === "user")!.turn;
}

describe("a turn failing three times then succeeding", () => {
  it("logs three turn.retrying events, then its answer; the messages API says retrying with the cause meanwhile", async () => {
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
    const event = chatEvent({ content: "Are you there?" });
    const threadId = event.data.messageId;
    bed.model.script(OVERLOADED, OVERLOADED, OVERLOADED, { text: "Here now." });

    // Inngest's retries: the same run again with its memo, one attempt more each time.
    let run = await execute(chatTurn, event);
    const shown = [await shownTurn(threadId)];
    for (let attempt = 1; attempt <= 3; attempt += 1) {
      expect(run.error).toBeDefined();
      run = await execute(chatTurn, event, { memo: run.memo, runId: run.runId, attempt });
      shown.push(await shownTurn(threadId));
    }

    expect(run.error).toBeUndefined();
    expect(shown).toEqual([
      { status: "retrying", runId: run.runId, error: CAUSE },
      { status: "retrying", runId: run.runId, error: CAUSE },
      { status: "retrying", runId: run.runId, error: CAUSE },
      { status: "completed", runId: run.runId, error: null },
    ]);
    const maxAttempts = TURN_RETRIES + 1;
    expect(
      (await logOf(threadId)).map(({ event: name, data }) =>
        name === "turn.retrying" ? [name, data] : [name, data.status],
      ),
    ).toEqual([
      ["turn.retrying", { attempt: 2, maxAttempts, cause: CAUSE }],
      ["turn.retrying", { attempt: 3, maxAttempts, cause: CAUSE }],
      ["turn.retrying", { attempt: 4, maxAttempts, cause: CAUSE }],
      ["stream.ended", "completed"],
    ]);
  });

  it("through the engine stand-in under INFERENCE=stream (the inference is a step the SDK retries): the same three events, then the answer", async () => {
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model), inference: "stream" });
    live = await startLiveEngine(bed.db.pool, [chatTurn]);
    bed.model.script(OVERLOADED, OVERLOADED, OVERLOADED, { text: "Here now." });
    const event = chatEvent({ content: "Are you there?" });
    await live.engine.send(event);
    const run = await live.engine.runFor((r) => r.fnId === "threadline-chat-turn");
    await run.ended;

    expect(run.status).toBe("completed");
    const log = (await logOf(event.data.messageId)).filter(
      (e) => e.event === "turn.retrying" || e.event === "stream.ended",
    );
    expect(log.map((e) => [e.event, e.data.attempt ?? e.data.status])).toEqual([
      ["turn.retrying", 2],
      ["turn.retrying", 3],
      ["turn.retrying", 4],
      ["stream.ended", "completed"],
    ]);
    expect(log[0]!.data).toEqual({
      attempt: 2,
      maxAttempts: TURN_RETRIES + 1,
      cause: expect.stringMatching(/^The model provider answered HTTP 503: The engine is currently overloaded/),
    });
  });
});

describe("under INFERENCE=gateway (each inference attempt invokes model-inference, which the server does not retry)", () => {
  /** The turn and the function it invokes for each model call, served together as createFunctions does. */
  const gatewayTurn = () => {
    const deps = { db: bed.db.pool, model: scriptedModel(bed.model) };
    return [createChatTurn(deps), createModelInference(deps)];
  };

  it("a turn whose inference fails three times then succeeds logs three turn.retrying events, then its answer, after four model calls", async () => {
    live = await startLiveEngine(bed.db.pool, gatewayTurn());
    bed.model.script(OVERLOADED, OVERLOADED, OVERLOADED, { text: "Here now." });
    const event = chatEvent({ content: "Are you there?" });
    await live.engine.send(event);
    const run = await live.engine.runFor((r) => r.fnId === "threadline-chat-turn");
    await run.ended;

    expect(run.status).toBe("completed");
    // One provider call per attempt (the invoked run has no retries): three failed attempts, then the answer.
    expect(run.inferences.map((i) => i.status)).toEqual([503, 503, 503, 200]);
    expect(bed.model.requests).toHaveLength(4);
    const log = await logOf(event.data.messageId);
    expect(
      log.map(({ event: name, data }) => (name === "turn.retrying" ? [name, data.attempt] : [name, data.status])),
    ).toEqual([
      ["turn.retrying", 2],
      ["turn.retrying", 3],
      ["turn.retrying", 4],
      ["stream.ended", "completed"],
    ]);
    for (const { data } of log.slice(0, 3)) {
      expect(data).toEqual({
        attempt: expect.any(Number),
        maxAttempts: TURN_RETRIES + 1,
        cause: CAUSE,
        nextAttemptAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      });
    }
    // The pause before each attempt is the one announced (10 s, then 30 s: src/functions/streaming-inference.ts).
    const announced = log.slice(0, 3).map(({ data }) => Date.parse(String(data.nextAttemptAt)));
    expect(announced[1]! - announced[0]!).toBeGreaterThan(0);
    expect(await shownTurn(event.data.messageId)).toEqual({ status: "completed", runId: run.runId, error: null });
    // The failure path's steps (docs: the engine note): attempt 1 keeps the inference's step id.
    const inference = run.order.find((s) => s.kind === "InvokeFunction")!.id;
    expect(inference).toBe("assistant");
    expect(
      run.order.filter((s) => s.id.startsWith(`${inference}:`) || s.id === inference).map((s) => [s.id, s.kind]),
    ).toEqual([
      [inference, "InvokeFunction"],
      [`${inference}:retrying-2`, "StepRun"],
      [`${inference}:backoff-2`, "Sleep"],
      [`${inference}:retry-2`, "InvokeFunction"],
      [`${inference}:retrying-3`, "StepRun"],
      [`${inference}:backoff-3`, "Sleep"],
      [`${inference}:retry-3`, "InvokeFunction"],
      [`${inference}:retrying-4`, "StepRun"],
      [`${inference}:backoff-4`, "Sleep"],
      [`${inference}:retry-4`, "InvokeFunction"],
      [`${inference}:retried`, "StepRun"],
    ]);
    // Each attempt is a run of model-inference with one step.ai.infer; the invoke returns exactly
    // what that step.ai.infer returned (the provider's answer, which AgentKit parses as before).
    const attempts = live.engine.runs.filter((r) => r.invokedBy === run);
    expect(attempts.map((r) => [r.fnId, r.status, r.order.map((s) => s.kind)])).toEqual(
      ["failed", "failed", "failed", "completed"].map((status) => [
        "threadline-model-inference",
        status,
        ["step.ai.infer"],
      ]),
    );
    // Each is handed the request body only: the model, its URL and its key are the app's configuration.
    for (const attempt of attempts) {
      expect(Object.keys(attempt.event.data)).toEqual(["body"]);
      expect(JSON.stringify(attempt.event.data)).not.toMatch(/test-key|127\.0\.0\.1/);
    }
    const answered = attempts[3]!;
    const answer = run.order.find((s) => s.id === `${inference}:retry-4`)!;
    expect(run.steps[answer.hashedId]).toEqual(answered.steps[answered.order[0]!.hashedId]);
    expect(run.steps[answer.hashedId]).toMatchObject({ type: "data", data: { choices: expect.any(Array) } });
  });

  it("while it waits for the next attempt, the messages API says retrying with the cause; completed once it answered", async () => {
    // The first pause (10 s) lasts 1 s of real time: long enough to look at the turn meanwhile.
    live = await startLiveEngine(bed.db.pool, gatewayTurn(), { msPerSecond: 100 });
    bed.model.script(OVERLOADED, { text: "Here now." });
    const event = chatEvent({ content: "Are you there?" });
    await live.engine.send(event);
    const run = await live.engine.runFor((r) => r.fnId === "threadline-chat-turn");
    await expect
      .poll(async () => (await logOf(event.data.messageId)).map((e) => e.event), { timeout: 10_000 })
      .toContain("turn.retrying");
    expect(await shownTurn(event.data.messageId)).toEqual({ status: "retrying", runId: run.runId, error: CAUSE });
    // The failed attempt is shown after one provider call.
    expect(run.inferences.map((i) => i.status)).toEqual([503]);
    await run.ended;
    expect(run.status).toBe("completed");
    expect(await shownTurn(event.data.messageId)).toEqual({ status: "completed", runId: run.runId, error: null });
  });

  it("a provider's refusal (4xx other than 408/429) fails the turn at once, after one model call, with no turn.retrying", async () => {
    live = await startLiveEngine(bed.db.pool, gatewayTurn());
    const refused = {
      status: 401,
      body: { error: { message: "Incorrect API key provided", type: "invalid_request_error" } },
    };
    bed.model.script(refused, refused);
    const event = chatEvent({ content: "Are you there?" });
    await live.engine.send(event);
    const run = await live.engine.runFor((r) => r.fnId === "threadline-chat-turn");
    await run.ended;

    expect(run.status).toBe("failed");
    expect(run.inferences.map((i) => i.status)).toEqual([401]);
    expect(bed.model.requests).toHaveLength(1);
    await expect.poll(async () => (await turnsOf(bed.db.pool, event.data.messageId))[0]?.status).toBe("failed");
    expect((await turnsOf(bed.db.pool, event.data.messageId))[0]!.error).toBe(
      "The model provider answered HTTP 401: Incorrect API key provided (invalid_request_error)",
    );
    expect((await logOf(event.data.messageId)).map((e) => e.event)).not.toContain("turn.retrying");
  });

  it("a model that keeps failing fails the turn after five model calls in all, with the cause", async () => {
    live = await startLiveEngine(bed.db.pool, gatewayTurn());
    const maxAttempts = TURN_RETRIES + 1;
    // More failures scripted than the turn may use: the count below is the turn's, not the script's.
    bed.model.script(...Array.from({ length: 2 * maxAttempts }, () => OVERLOADED));
    const event = chatEvent({ content: "Are you there?" });
    await live.engine.send(event);
    const run = await live.engine.runFor((r) => r.fnId === "threadline-chat-turn");
    await run.ended;

    expect(run.status).toBe("failed");
    expect(run.inferences).toHaveLength(maxAttempts);
    expect(bed.model.requests).toHaveLength(maxAttempts);
    await expect.poll(async () => (await turnsOf(bed.db.pool, event.data.messageId))[0]?.status).toBe("failed");
    expect((await turnsOf(bed.db.pool, event.data.messageId))[0]!.error).toBe(CAUSE);
    expect(
      (await logOf(event.data.messageId)).filter((e) => e.event === "turn.retrying").map((e) => e.data.attempt),
    ).toEqual([2, 3, 4, 5]);
  });
});

describe("turn.retrying", () => {
  it("is written once per failed attempt, and never after the turn ended", async () => {
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
    const event = chatEvent({ content: "Hello?" });
    bed.model.script(OVERLOADED);
    const failed = await execute(chatTurn, event);
    const [retrying] = (await logOf(event.data.messageId)).filter((e) => e.event === "turn.retrying");
    // The same failed attempt reported again (a re-delivered request) writes nothing more.
    const key = (
      await bed.db.pool.query<{ key: string }>(
        "SELECT key FROM thread_events WHERE event = 'turn.retrying' AND run_id = $1",
        [failed.runId],
      )
    ).rows[0]!.key;
    expect(
      await recordTurnRetrying(
        bed.db.pool,
        failed.runId,
        key,
        retrying!.data as { attempt: number; maxAttempts: number; cause: string },
      ),
    ).toBe(false);
    expect((await logOf(event.data.messageId)).filter((e) => e.event === "turn.retrying")).toHaveLength(1);

    bed.model.script({ text: "Hi." });
    expect(
      (await execute(chatTurn, event, { memo: failed.memo, runId: failed.runId, attempt: 1 })).error,
    ).toBeUndefined();
    expect(await turnsOf(bed.db.pool, event.data.messageId)).toMatchObject([{ status: "completed" }]);
    expect(
      await recordTurnRetrying(bed.db.pool, failed.runId, "late", { attempt: 3, maxAttempts: 5, cause: "too late" }),
    ).toBe(false);
    expect((await logOf(event.data.messageId)).map((e) => e.event)).toEqual(["turn.retrying", "stream.ended"]);
  });
});
