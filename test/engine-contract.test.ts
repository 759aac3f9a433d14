import { randomUUID } from "node:crypto";
import { InngestTestEngine } from "@inngest/test";
import { invoke, openai, StepError } from "inngest";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { inngest, type StepTools } from "../inngest.config.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { describeFailure } from "../src/functions/failure-message.js";
import { createModelInference } from "../src/functions/model-inference.js";
import { modelFailureMessage } from "../src/agents/model-errors.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import {
  cancelOnDeletion,
  cancelOnStop,
  createTurnCancellation,
  TURN_RETRIES,
} from "../src/functions/turn-lifecycle.js";
import {
  MAX_WAIT_ROUNDS,
  QUICK_ROUND,
  QUICK_ROUNDS,
  roundTimeout,
  waitForEarlierTurns,
} from "../src/history/turn-waits.js";
import { aiGatewayError } from "./helpers/engine-stand-in.js";
import { execute, waitForEventOnBus } from "./helpers/engine.js";
import { chatEvent, scriptedModel } from "./helpers/fixtures.js";
import { startLiveEngine, type LiveEngine } from "./helpers/live-engine.js";
import { useTestBed } from "./helpers/test-bed.js";

/**
 * The engine contract: each behaviour of the real Inngest engine that Threadline relies on and
 * that InngestTestEngine does not model, with where the fact comes from and what here pins it.
 * Sources: "BRIEF" = the engine facts observed on Inngest dev server 1.43 with SDK 4.24
 * (/work/notes/BRIEF.md, "Facts of the real engine"); "docs" = Inngest's documentation.
 * docs/engine.md renders this table for readers. When the engine changes, change the fact here
 * first: the tests below say which of Threadline's choices depend on it.
 */
export const ENGINE_CONTRACT = [
  {
    fact: 'A failed step.ai.infer reaches the SDK as {name: AIGatewayError, message: \'Error making AI request: unsuccessful status code: <n>\', stack: <provider body>, data: <provider body>}; an empty body as {"error":"Error making AI request"}.',
    source: "BRIEF",
    reliedOnBy: "src/agents/model-errors.ts (the recorded failure cause)",
    pinnedBy: "the AI gateway's error shape",
  },
  {
    fact: "The server retries a failed step.ai.infer itself (the function's retries apply to it as to any step) and hands the SDK only the last attempt's error, which the SDK throws where step.ai.infer is awaited: a StepError named AIGatewayError with the server's message and the provider body as its stack. The run goes on if the function catches it.",
    source:
      "BRIEF (five attempts, ~4.6 minutes, before the turn was recorded failed); inngest/agent-kit PR #75 (an Inngest maintainer: step.ai.infer retries errors, and when retries are exhausted turns them into an AIGatewayError and the call throws); SDK 4.24 source: node_modules/inngest/components/execution/engine.js (a memoized step with an error and no data rejects the step's promise with `new StepError(opId.id, result.error)`, reached at the await) and components/StepError.js (name, message and stack from the serialized error)",
    reliedOnBy:
      "src/functions/model-inference.ts (retries: 0, so its one step.ai.infer is one provider call and its error comes at once); summaries, titles and memory extraction keep the server's retries",
    pinnedBy: "the AI gateway's error shape",
  },
  {
    fact: "step.invoke starts a run of the named function (trigger inngest/function.invoked, declared with the SDK's invoke(); nobody else sends it) with its own retries. The invoking step is not retried: when the invoked run fails, the step is resumed with that run's error as the run reported it (the SDK's serialized error: name, message, stack), which the SDK throws where step.invoke is awaited as a StepError of that name; when it completes, with exactly the value the run returned.",
    source:
      "docs (step.invoke: 'Retries' and 'Error handling': a failed invoked function fails the step with a NonRetriableError, to avoid compounding retries); Inngest server source: pkg/execution/state Pause.GetResumeData (an invoke resumes with {error} or {data: result} of inngest/function.finished) and pkg/execution/executor functionFinishedData.setResponse (error = the run's user error, result = its output); SDK 4.24 source: components/triggers/triggers.js (invoke() = inngest/function.invoked), components/InngestStepTools.js (the InvokeFunction op)",
    reliedOnBy:
      "src/functions/streaming-inference.ts (gatewayRetries: each attempt of a turn's gateway inference invokes model-inference, writing turn.retrying for each failed attempt); src/agents/model-errors.ts (the cause of a failed invoke)",
    pinnedBy: "step.invoke",
  },
  {
    fact: "An in-flight AI gateway request counts as an executing step for concurrency keys, even after its run is cancelled.",
    source: "BRIEF",
    reliedOnBy: "the turn functions hold no concurrency key; src/history/turn-waits.ts orders a thread's turns",
    pinnedBy: "concurrency",
  },
  {
    fact: "step.waitForEvent only sees events sent after the wait started.",
    source: "BRIEF; docs (step.waitForEvent: 'the event must be sent after the wait starts')",
    reliedOnBy: "src/history/turn-waits.ts (rounds: a lookup after every wait, short first rounds)",
    pinnedBy: "waitForEvent",
  },
  {
    fact: "A rerun from a step (dev server, REST API) is a new run: earlier steps stay memoized from the original (a begin-turn result that says running), later ones run again.",
    source: "BRIEF",
    reliedOnBy: "src/history/adapter.ts (the re-run rule: history.rerun-begin-turn.<runId>)",
    pinnedBy: "rerun from a step",
  },
  {
    fact: "cancelOn, idempotency keys, event-id dedupe and inngest/function.cancelled behave as documented; Inngest calls no onFailure for a cancelled run.",
    source: "BRIEF; docs (cancellation, idempotency, system events)",
    reliedOnBy: "the stop (cancelOn + turn.finished under the run's own event id), src/functions/turn-lifecycle.ts",
    pinnedBy: "cancellation and deduplication",
  },
  {
    fact: "Retries use Inngest's backoff (~26 s, 50 s, 75 s, 127 s); a function's retries apply to each step; attempts count from 0 in ctx.attempt.",
    source: "BRIEF; docs (retries)",
    reliedOnBy: "TURN_RETRIES, turn.retrying {attempt, maxAttempts}",
    pinnedBy: "retries",
  },
  {
    fact: "InngestTestEngine neither serializes step results, retries, models concurrency keys, debounce nor executes step.ai.infer or step.invoke.",
    source: "BRIEF; @inngest/test 1.0.0",
    reliedOnBy:
      "test/helpers/engine.ts (JSON round-trip, inference as step.run + fetch, an invoke as step.run running the invoked function in an engine of its own, waits on a bus), test/helpers/engine-stand-in.ts",
    pinnedBy: "the test engine",
  },
] as const;

const bed = useTestBed();
const deps = () => ({ db: bed.db.pool, model: scriptedModel(bed.model) });
type FnOpts = { opts: { concurrency?: unknown; cancelOn?: unknown; idempotency?: unknown; retries?: number } };
const optsOf = (fn: unknown) => (fn as FnOpts).opts;

describe("the engine contract", () => {
  it("names each fact once, with its source and what pins it", () => {
    const pinned = new Set([
      "the AI gateway's error shape",
      "concurrency",
      "waitForEvent",
      "rerun from a step",
      "cancellation and deduplication",
      "retries",
      "the test engine",
      "step.invoke",
    ]);
    for (const entry of ENGINE_CONTRACT) {
      expect(entry.source).not.toBe("");
      expect(pinned.has(entry.pinnedBy), entry.pinnedBy).toBe(true);
    }
  });
});

describe("the AI gateway's error shape (BRIEF)", () => {
  it("the stand-in hands over exactly the observed shape, and the app reads status and provider body from it", () => {
    const body = '{"error":{"message":"The server had an error","type":"server_error"}}';
    const failed = aiGatewayError(500, body);
    expect(failed).toEqual({
      name: "AIGatewayError",
      message: "Error making AI request: unsuccessful status code: 500",
      stack: body,
      data: body,
    });
    expect(describeFailure({ message: modelFailureMessage(failed) })).toBe(
      "The model provider answered HTTP 500: The server had an error (server_error)",
    );
  });

  it("an empty provider body arrives as the server's own body", () => {
    expect(aiGatewayError(undefined, "").data).toBe('{"error":"Error making AI request"}');
    expect(modelFailureMessage(aiGatewayError(undefined, ""))).toMatch(
      /^The model request got no answer from the provider/,
    );
  });
});

describe("a failed step.ai.infer, as the SDK hands it to the function (agent-kit PR #75, SDK 4.24 source)", () => {
  let live: LiveEngine | undefined;
  afterEach(async () => {
    await live?.close();
    live = undefined;
  });

  it("is thrown where step.ai.infer is awaited, after the server's own retries, as a StepError named AIGatewayError; the function may catch it and go on", async () => {
    const probe = inngest.createFunction(
      { id: "contract-gateway-error", triggers: [{ event: "contract/gateway-error" }], retries: 2 },
      async ({ step }) => {
        const model = openai({ model: "scripted-model", baseUrl: `${bed.model.baseUrl}/`, apiKey: "test-key" });
        try {
          await step.ai.infer("infer", { model, body: { messages: [{ role: "user", content: "Hi" }] } });
          return { thrown: false };
        } catch (error) {
          const { name, message, stack } = error as Error;
          return { thrown: true, isStepError: error instanceof StepError, name, message, stack };
        }
      },
    );
    live = await startLiveEngine(bed.db.pool, [probe]);
    const body = { error: { message: "The server had an error", type: "server_error" } };
    // retries: 2 — the server makes three attempts of the inference before it hands over the error.
    bed.model.script(...Array.from({ length: 3 }, () => ({ status: 500, body })));
    await live.engine.send({ name: "contract/gateway-error", data: {} });
    const run = await live.engine.runFor((r) => r.fnId === "threadline-contract-gateway-error");
    await run.ended;

    expect(run.inferences.map((i) => i.status)).toEqual([500, 500, 500]);
    expect(run.status).toBe("completed");
    expect(run.output).toEqual({
      thrown: true,
      isStepError: true,
      name: "AIGatewayError",
      message: "Error making AI request: unsuccessful status code: 500",
      stack: JSON.stringify(body),
    });
  });
});

describe("step.invoke (docs, Inngest server source; modelled by the stand-in)", () => {
  let live: LiveEngine | undefined;
  afterEach(async () => {
    await live?.close();
    live = undefined;
  });

  /** A function that invokes one step.ai.infer run with no retries, as a turn's gateway inference attempt does. */
  const invoker = () => {
    const child = inngest.createFunction(
      { id: "contract-invoked-inference", triggers: [invoke(z.object({ content: z.string() }))], retries: 0 },
      async ({ event, step }) => {
        const model = openai({ model: "scripted-model", baseUrl: `${bed.model.baseUrl}/`, apiKey: "test-key" });
        return step.ai.infer("infer", { model, body: { messages: [{ role: "user", content: event.data.content }] } });
      },
    );
    const parent = inngest.createFunction(
      { id: "contract-invoke", triggers: [{ event: "contract/invoke" }], retries: 4 },
      async ({ step }) => {
        try {
          return { answer: await step.invoke("attempt", { function: child, data: { content: "Hi" } }) };
        } catch (error) {
          const { name, message, stack } = error as Error;
          return { thrown: true, isStepError: error instanceof StepError, name, message, stack };
        }
      },
    );
    return [parent, child];
  };

  it("a failed invoked run reaches the invoking step after one provider call, thrown as a StepError named AIGatewayError; the invoke is not retried", async () => {
    live = await startLiveEngine(bed.db.pool, invoker());
    const body = { error: { message: "The server had an error", type: "server_error" } };
    bed.model.script(...Array.from({ length: 5 }, () => ({ status: 500, body })));
    await live.engine.send({ name: "contract/invoke", data: {} });
    const run = await live.engine.runFor((r) => r.fnId === "threadline-contract-invoke");
    await run.ended;

    expect(bed.model.requests).toHaveLength(1);
    expect(run.status).toBe("completed");
    expect(run.output).toEqual({
      thrown: true,
      isStepError: true,
      name: "AIGatewayError",
      message: "Error making AI request: unsuccessful status code: 500",
      stack: JSON.stringify(body),
    });
  });

  it("a completed invoked run hands the invoking step exactly what it returned: here step.ai.infer's provider answer", async () => {
    live = await startLiveEngine(bed.db.pool, invoker());
    bed.model.script({ text: "Hello." });
    await live.engine.send({ name: "contract/invoke", data: {} });
    const run = await live.engine.runFor((r) => r.fnId === "threadline-contract-invoke");
    await run.ended;
    const child = live.engine.runs.find((r) => r.invokedBy === run)!;

    const inferred = child.steps[child.order[0]!.hashedId] as { type: string; data: unknown };
    expect(child.order.map((s) => s.kind)).toEqual(["step.ai.infer"]);
    expect(inferred.type).toBe("data");
    expect(run.output).toEqual({ answer: inferred.data });
    expect(run.output).toMatchObject({ answer: { choices: [{ message: { content: "Hello." } }] } });
  });

  it("model-inference is invoke-only, with no retries", () => {
    const fn = createModelInference(deps());
    const { retries, triggers } = (fn as unknown as { opts: { retries: number; triggers: { event?: string }[] } }).opts;
    expect(retries).toBe(0);
    expect(triggers.map((t) => t.event)).toEqual(["inngest/function.invoked"]);
  });
});

describe("concurrency (BRIEF: an in-flight gateway inference holds a concurrency key after cancel)", () => {
  it("the turn functions hold no concurrency key, so a stopped turn's inference holds nothing the next turn needs", () => {
    for (const fn of [createChatTurn(deps()), createRegenerate(deps())]) expect(optsOf(fn).concurrency).toBeUndefined();
  });
});

describe("waitForEvent (BRIEF: only events sent after the wait started)", () => {
  it("the test engine's waits model it: a turn's finished event, sent before the wait, is not seen", async () => {
    bed.model.script({ text: "Hi." });
    const run = await execute(createChatTurn(deps()), chatEvent({ content: "Hello" }));
    expect(run.sentEvents).toContainEqual(
      expect.objectContaining({
        name: "threadline/turn.finished",
        data: expect.objectContaining({ runId: run.runId }),
      }),
    );
    const seen = await waitForEventOnBus({
      id: "wait",
      event: "threadline/turn.finished",
      timeout: "1s",
      match: { field: "runId", value: run.runId },
    });
    expect(seen).toBeNull();
  });

  it("so every wait of a turn is a bounded round followed by a lookup, and the first rounds are short", async () => {
    expect(roundTimeout(1)).toBe(QUICK_ROUND);
    expect(roundTimeout(QUICK_ROUNDS + 1)).toBe("1m");
    // Two steps per round stay under Inngest's 1,000 steps per run.
    expect(2 * MAX_WAIT_ROUNDS).toBeLessThan(1_000);
    const calls: string[] = [];
    // Only the two tools the wait uses.
    const step = {
      run: async (id: string, work: () => Promise<unknown>) => (calls.push(id), work()),
      waitForEvent: async (id: string) => (calls.push(id), null),
    } as unknown as StepTools;
    // A run with no turn finds nothing ahead: one lookup, no wait.
    expect(await waitForEarlierTurns(step, bed.db.pool, `run-${randomUUID()}`)).toEqual({});
    expect(calls).toEqual(["history.find-earlier-turn"]);
  });
});

describe("rerun from a step (BRIEF: earlier steps stay memoized from the original run; test/rerun.test.ts reruns through the stand-in)", () => {
  it("the begin-turn step's memoized result names the run that began the turn, so a rerun can tell it is not its own", async () => {
    bed.model.script({ text: "Hi." });
    const run = await execute(createChatTurn(deps()), chatEvent({ content: "Hello" }));
    const begun = run.memo
      .map((step) => step.handler())
      .find((data) => typeof data === "object" && data !== null && "messageSeq" in data);
    expect(begun).toMatchObject({ status: "running", runId: run.runId });
  });
});

describe("cancellation and deduplication (BRIEF, docs)", () => {
  it("a stop cancels the run answering the same message; a cancelled run is recorded by a function on inngest/function.cancelled", () => {
    for (const fn of [createChatTurn(deps()), createRegenerate(deps())])
      expect(optsOf(fn).cancelOn).toEqual([...cancelOnStop, ...cancelOnDeletion]);
    expect(cancelOnStop).toEqual([expect.objectContaining({ if: "async.data.messageId == event.data.messageId" })]);
    // Deleting a thread (or erasing its user) cancels its running and queued runs (docs/data-lifecycle.md).
    expect(cancelOnDeletion.map((entry) => entry.if)).toEqual([
      "async.data.threadId == event.data.threadId && async.data.userId == event.data.userId",
      "async.data.threadId == event.data.messageId && async.data.userId == event.data.userId",
      "async.data.userId == event.data.userId",
    ]);
    const cancelled = createTurnCancellation(deps()) as unknown as {
      opts: { triggers: { event: string; if: string }[] };
    };
    expect(cancelled.opts.triggers[0]!.event).toBe("inngest/function.cancelled");
    expect(cancelled.opts.triggers[0]!.if).toContain(`${inngest.id}-chat-turn`);
  });

  it("a chat message is answered by one run: the idempotency key is its id, scoped by its user (and, sent again after a run that began no turn, that run)", () => {
    expect(optsOf(createChatTurn(deps())).idempotency).toBe(
      'has(event.data.resentAfter) ? event.data.userId + ":" + event.data.messageId + ":" + event.data.resentAfter : event.data.userId + ":" + event.data.messageId',
    );
  });
});

describe("retries (BRIEF, docs)", () => {
  it("turns retry TURN_RETRIES times: five attempts, which turn.retrying reports as maxAttempts", () => {
    expect(TURN_RETRIES).toBe(4);
    for (const fn of [createChatTurn(deps()), createRegenerate(deps())]) expect(optsOf(fn).retries).toBe(TURN_RETRIES);
  });
});

describe("the test engine (BRIEF, @inngest/test 1.0.0)", () => {
  it("InngestTestEngine hands step results back unserialized: the helpers JSON round-trip the memo as the real engine does", async () => {
    const fn = inngest.createFunction(
      { id: "contract-serialization", triggers: [{ event: "contract/serialization" }] },
      async ({ step }) => {
        const when = await step.run("now", () => new Date(0));
        return typeof when;
      },
    );
    const raw = await new InngestTestEngine({
      function: fn,
      events: [{ name: "contract/serialization", data: {} }],
    }).execute();
    // Unserialized: the Date stays a Date in the raw engine. On the real engine it would be a string.
    expect(raw.result).toBe("object");
    const run = await execute(fn, { name: "contract/serialization", data: {} });
    expect(run.memo.map((step) => step.handler())).toEqual([new Date(0).toISOString()]);
  });
});
