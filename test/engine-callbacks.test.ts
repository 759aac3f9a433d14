import { afterEach, describe, expect, it } from "vitest";
import { inngest } from "../inngest.config.js";
import { execute, onSentEvents, StepFault } from "./helpers/engine.js";
import { type EngineStandIn, startEngineStandIn } from "./helpers/engine-stand-in.js";

/**
 * The test engines call a test's own callbacks (a wait's resolver, beforeStep, an observer of sent
 * events, a run predicate) inside a run's steps or the stand-in's server: what they throw must fail
 * the test that supplied them, not become a failed step of the run that a passing test ignores.
 */
const waiter = inngest.createFunction(
  { id: "callbacks-wait", triggers: [{ event: "callbacks/wait" }], retries: 2 },
  async ({ step }) => {
    const decided = await step.waitForEvent("wait", { event: "callbacks/decided", timeout: "1m" });
    await step.run("after", () => "done");
    await step.sendEvent("announce", { name: "callbacks/announced", data: {} });
    return { decided: decided !== null };
  },
);
const event = { name: "callbacks/wait", data: {} };

describe("a callback a test gives execute", () => {
  it("a waits resolver whose expect fails: execute fails with the assertion's message", async () => {
    const run = execute(waiter, event, {
      waits: async () => {
        expect("denied").toBe("bogus");
        return null;
      },
    });
    await expect(run).rejects.toThrow("expected 'denied' to be 'bogus'");
  });

  it("a waits resolver that throws anything: execute fails with that error", async () => {
    const broke = new Error("the resolver broke");
    await expect(execute(waiter, event, { waits: () => Promise.reject(broke) })).rejects.toBe(broke);
  });

  it("a beforeStep whose expect fails: execute fails; a StepFault thrown there is the step's failure, as before", async () => {
    const failing = execute(waiter, event, {
      waits: async () => null,
      beforeStep: async (id) => expect(id).toBe("wait"),
    });
    await expect(failing).rejects.toThrow("expected 'after' to be 'wait'");

    const faulted = await execute(waiter, event, {
      waits: async () => null,
      beforeStep: async (id) => {
        if (id === "after") throw new StepFault("cut off");
      },
    });
    expect(faulted.error).toMatchObject({ message: "cut off" });
    expect(faulted.stepIds).toEqual(["wait", "after"]);
  });

  it("an observer of sent events that throws: the execute whose step sent them fails", async () => {
    const unsubscribe = onSentEvents(() => {
      throw new Error("the observer broke");
    });
    try {
      await expect(execute(waiter, event, { waits: async () => null })).rejects.toThrow("the observer broke");
    } finally {
      unsubscribe();
    }
  });

  it("without a failing callback, execute answers as it did", async () => {
    const run = await execute(waiter, event, { waits: async () => ({ name: "callbacks/decided", data: {} }) });
    expect(run.error).toBeUndefined();
    expect(run.result).toEqual({ decided: true });
    expect(run.sentEvents).toEqual([{ name: "callbacks/announced", data: {} }]);
  });
});

describe("a predicate a test gives the stand-in's runFor", () => {
  let standIn: EngineStandIn | undefined;
  afterEach(async () => {
    await standIn?.close();
    standIn = undefined;
  });

  it("that throws when a run starts: runFor fails with its error", async () => {
    standIn = await startEngineStandIn();
    // A function whose runs fail at once (nothing serves it): only their start matters here.
    const registration = {
      functions: [
        {
          id: "callbacks-nowhere",
          triggers: [{ event: "callbacks/start" }],
          steps: { step: { runtime: { url: "http://127.0.0.1:9/api/inngest" }, retries: { attempts: 0 } } },
        },
      ],
    };
    await fetch(`${standIn.url}/fn/register`, { method: "POST", body: JSON.stringify(registration) });
    const found = expect(
      standIn.runFor((run) => {
        throw new Error(`the predicate broke on ${run.fnId}`);
      }, 2_000),
    ).rejects.toThrow("the predicate broke on callbacks-nowhere");
    await standIn.send({ name: "callbacks/start", data: {} });
    await found;
  });
});
