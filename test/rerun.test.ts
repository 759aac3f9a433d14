import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createModelInference } from "../src/functions/model-inference.js";
import { createTurnCancellation } from "../src/functions/turn-lifecycle.js";
import { resultId } from "../src/history/ids.js";
import { execute, memoBefore } from "./helpers/engine.js";
import type { StandInRun } from "./helpers/engine-stand-in.js";
import { chatEvent, scriptedModel, threadRows, turnsOf } from "./helpers/fixtures.js";
import { startLiveEngine, type LiveEngine } from "./helpers/live-engine.js";
import { useTestBed } from "./helpers/test-bed.js";

/**
 * The dev server and Inngest's REST API rerun a run from a chosen step: a new run id, the steps
 * before it memoized from the original (a begin-turn result that says "running"), the later ones
 * run again (BRIEF.md's engine facts). The re-run rule (docs/engine.md): a rerun of a message that
 * has its answer calls no model, stores and logs nothing, and says it skipped, naming the answer.
 */
const bed = useTestBed();
const deps = () => ({ db: bed.db.pool, model: scriptedModel(bed.model) });

const loggedEvents = async (threadId: string) =>
  (
    await bed.db.pool.query<{ event: string; run_id: string }>(
      "SELECT event, run_id FROM thread_events WHERE thread_id = $1 ORDER BY id",
      [threadId],
    )
  ).rows;

describe("a rerun of an answered run, through the engine stand-in", () => {
  let live: LiveEngine;
  let answered: StandInRun;
  let threadId: string;

  beforeAll(async () => {
    live = await startLiveEngine(bed.db.pool, [
      createChatTurn(deps()),
      createTurnCancellation(deps()),
      createModelInference(deps()),
    ]);
    bed.model.script({ text: "The answer." });
    const event = chatEvent({ content: "A question." });
    threadId = event.data.messageId;
    await live.engine.send(event);
    answered = await live.engine.runFor((r) => r.fnId === "threadline-chat-turn");
    await answered.ended;
    expect(answered.status).toBe("completed");
  });
  afterAll(async () => {
    await live.close();
  });

  it("from the inference step: zero model calls, one stream.ended in the log, an output naming the stored answer", async () => {
    const modelCalls = bed.model.requests.length;
    // AgentKit names the inference step after the agent.
    expect(answered.order.map((s) => s.id)).toContain("assistant");
    const rerun = live.engine.rerun(answered, "assistant");
    await rerun.ended;

    expect(bed.model.requests).toHaveLength(modelCalls);
    expect(rerun.inferences).toEqual([]);
    expect(rerun.status).toBe("completed");
    expect(rerun.output).toMatchObject({ status: "skipped", answerId: resultId(threadId, 1, 0) });
    expect((await threadRows(bed.db.pool, threadId)).map((r) => r.id)).toEqual([threadId, resultId(threadId, 1, 0)]);
    expect((await loggedEvents(threadId)).filter((e) => e.event === "stream.ended")).toEqual([
      { event: "stream.ended", run_id: answered.runId },
    ]);
  });

  it("from every step, and as a whole: each is skipped, calls no model and logs nothing", async () => {
    const modelCalls = bed.model.requests.length;
    const logged = (await loggedEvents(threadId)).length;
    for (const fromStep of [undefined, ...answered.order.map((s) => s.id)]) {
      const rerun = live.engine.rerun(answered, fromStep);
      await rerun.ended;
      expect({ fromStep, output: rerun.output }).toMatchObject({
        fromStep,
        output: { status: "skipped", answerId: resultId(threadId, 1, 0) },
      });
    }
    expect(bed.model.requests).toHaveLength(modelCalls);
    expect(await loggedEvents(threadId)).toHaveLength(logged);
    expect((await turnsOf(bed.db.pool, threadId)).filter((t) => t.status !== "skipped")).toMatchObject([
      { run_id: answered.runId, status: "completed" },
    ]);
  });
});

describe("a rerun from the inference step of a run that failed there", () => {
  it("answers the message under its own turn (the original's memo says running for the original run)", async () => {
    const chatTurn = createChatTurn(deps());
    const event = chatEvent({ content: "Try again." });
    bed.model.script({ status: 400, body: { error: { message: "Bad request", type: "invalid_request_error" } } });
    const failed = await execute(chatTurn, event);
    expect(failed.error).toBeDefined();

    bed.model.script({ text: "Second time lucky." });
    const rerun = await execute(chatTurn, event, { memo: memoBefore(failed, "assistant") });

    expect(rerun.error).toBeUndefined();
    expect(rerun.stepIds).toContain(`history.rerun-begin-turn.${rerun.runId}`);
    expect(rerun.result).toMatchObject({ status: "completed", answer: "Second time lucky." });
    expect(await turnsOf(bed.db.pool, event.data.messageId)).toEqual(
      expect.arrayContaining([expect.objectContaining({ run_id: rerun.runId, status: "completed" })]),
    );
    expect((await loggedEvents(event.data.messageId)).filter((e) => e.event === "stream.ended")).toEqual([
      { event: "stream.ended", run_id: rerun.runId },
    ]);
  });
});
