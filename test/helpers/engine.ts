import { randomUUID } from "node:crypto";
import { InngestTestEngine, mockCtx } from "@inngest/test";
import { InngestExecutionEngine } from "inngest/internals";
import type { InngestFunction } from "inngest";

// @inngest/test resolves inngest's CommonJS types, the app its ESM ones: take the context type from the test package.
type TestContext = Parameters<typeof mockCtx>[0];

type AiModelLike = {
  url?: string;
  authKey?: string;
  format: string;
  onCall?: (model: AiModelLike, body: Record<string, unknown>) => void;
};

/** How long an inference waits for the scripted model before failing as a timeout. */
export const MODEL_TIMEOUT_MS = 2_000;

/**
 * The Inngest server executes step.ai.infer and step.invoke; InngestTestEngine cannot. This turns
 * each inference into a step.run under the same id that calls the model URL over HTTP (as
 * AgentKit's own fallback does), failing the step on a non-2xx answer as the server would, and
 * each invoke (a turn's gateway inference attempt: src/functions/model-inference.ts) into a
 * step.run under the same id that runs the invoked function to its end in an engine of its own,
 * returning its result or failing with its error (no retry of the invoke, as the server:
 * docs/engine.md). It also pins ctx.runId, which the engine otherwise changes on every execution
 * although a real run keeps its id across retries.
 */
export function inferOverHttp(runId: string, aiInferSteps: string[] = []) {
  return (rawCtx: TestContext): TestContext => {
    const ctx = mockCtx(rawCtx);
    const infer = (id: string, { model, body }: { model: AiModelLike; body: Record<string, unknown> }) => {
      if (!aiInferSteps.includes(id)) aiInferSteps.push(id);
      return ctx.step.run(id, async () => {
        const call = { ...model };
        model.onCall?.(call, body);
        const headers: Record<string, string> = { "content-type": "application/json" };
        if (call.format === "openai-chat") headers.authorization = `Bearer ${call.authKey}`;
        if (call.format === "anthropic")
          Object.assign(headers, { "x-api-key": call.authKey ?? "", "anthropic-version": "2023-06-01" });
        // The server gives up on a provider that does not answer; so does this, sooner.
        const response = await fetch(call.url ?? "", {
          method: "POST",
          headers,
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(MODEL_TIMEOUT_MS),
        });
        if (!response.ok)
          throw new Error(`Model answered HTTP ${response.status}: ${(await response.text()).slice(0, 4_000)}`);
        return response.json();
      });
    };
    const invoke = (id: string, opts: { function: InngestFunction.Like; data?: Record<string, unknown> }) => {
      // The app invokes only model-inference: each invoke is one request the server sends to the model.
      if (!aiInferSteps.includes(id)) aiInferSteps.push(id);
      return ctx.step.run(id, () => runInvoked(opts.function, opts.data ?? {}));
    };
    return { ...ctx, runId, step: { ...ctx.step, invoke, ai: { ...ctx.step.ai, infer } } } as TestContext;
  };
}

/** Runs an invoked function once (its own retries are none: model-inference) and returns its result, or throws its error. */
async function runInvoked(fn: InngestFunction.Like, data: Record<string, unknown>) {
  const engine = new InngestTestEngine({
    function: withFunctionMiddleware(fn),
    events: [{ id: `event-${randomUUID()}`, name: "inngest/function.invoked", data }],
    transformCtx: inferOverHttp(`run-${randomUUID()}`),
  });
  const { result, error } = (await engine.execute()) as unknown as { result?: unknown; error?: unknown };
  if (error === undefined) return result;
  if (error instanceof Error) throw error;
  const { name, message } = error as { name?: string; message?: string };
  throw Object.assign(new Error(message ?? String(error)), name ? { name } : {});
}

/**
 * The Inngest server delivers what step.sendEvent sends; under the test engine there is no
 * server to send to. This turns each sendEvent into a step.run under the same id that records
 * the events, so tests see what a run sent, once, however often it is retried. Sent events are
 * also published to every run of the test file that waits for them (see waitForEventOnBus). What
 * an observer (onSentEvents) throws goes to `failures` too (see testFailures).
 */
export function recordSentEvents(sent: SentEvent[], failures?: unknown[]) {
  return (ctx: TestContext): TestContext => {
    const sendEvent = (id: string, payload: SentEvent | SentEvent[]) =>
      ctx.step.run(id, async () => {
        const events = (Array.isArray(payload) ? payload : [payload]).map(
          (event) => JSON.parse(JSON.stringify(event)) as SentEvent,
        );
        sent.push(...events);
        try {
          publish(events);
        } catch (error) {
          failures?.push(error);
          throw error;
        }
        return { ids: events.map(() => `sent-${randomUUID()}`) };
      });
    return { ...ctx, step: { ...ctx.step, sendEvent } } as TestContext;
  };
}

export type SentEvent = { name: string; data: Record<string, unknown>; id?: string };

/** What a run's step.waitForEvent asked for: the event name, its timeout and the run id it matches. */
export type Wait = { id: string; event: string; timeout: string; match: { field: string; value: string } | undefined };

/**
 * Decides how a step.waitForEvent ends: with the event it waited for, or null (timed out). It
 * runs as the step, so its answer is memoized like the server's. A wait ends with the event or
 * null, never an error (docs: step.waitForEvent returns `Promise<null | EventPayload>`): what a
 * resolver throws fails the test (execute rejects with it), not a step.
 */
export type WaitResolver = (wait: Wait) => Promise<SentEvent | null>;

/** Every event the test file's runs sent, in order, with the listeners of waiting runs and of onSentEvents. */
const bus = {
  events: [] as SentEvent[],
  listeners: new Set<() => void>(),
  observers: new Set<(events: SentEvent[]) => void>(),
};

/** An event sent from outside the runs (an API route's sendEvent), delivered to the runs waiting for it. */
export const deliverToWaits = (event: SentEvent) => publish([JSON.parse(JSON.stringify(event)) as SentEvent]);

function publish(events: SentEvent[]) {
  bus.events.push(...events);
  // Observers first (a live app cancels the runs an event cancels), then the waits the events end.
  for (const observer of bus.observers) observer(events);
  for (const listener of bus.listeners) listener();
}

/** Calls `observer` with the events the test file's runs send (step.sendEvent), as they are sent; returns the unsubscribe. */
export function onSentEvents(observer: (events: SentEvent[]) => void): () => void {
  bus.observers.add(observer);
  return () => bus.observers.delete(observer);
}

/** Virtual time: one minute of a waitForEvent timeout lasts this many real milliseconds. */
const VIRTUAL_MINUTE_MS = 40;

const minutesOf = (timeout: string) => {
  const [, amount, unit] = /^(\d+)([smh])$/.exec(timeout) ?? [];
  if (!amount) throw new Error(`unsupported waitForEvent timeout in tests: ${timeout}`);
  return Number(amount) * { s: 1 / 60, m: 1, h: 60 }[unit as "s" | "m" | "h"];
};

/**
 * Like the Inngest server: the wait matches only events sent after it started, and ends with null
 * when its timeout (in virtual time) passes first.
 */
export const waitForEventOnBus: WaitResolver = (wait) => {
  const from = bus.events.length;
  return new Promise((resolve) => {
    const check = () => {
      const match = bus.events
        .slice(from)
        .find((e) => e.name === wait.event && (!wait.match || e.data[wait.match.field] === wait.match.value));
      if (!match) return;
      finish(match);
    };
    const timer = setTimeout(() => finish(null), minutesOf(wait.timeout) * VIRTUAL_MINUTE_MS);
    const finish = (event: SentEvent | null) => {
      clearTimeout(timer);
      bus.listeners.delete(check);
      resolve(event);
    };
    bus.listeners.add(check);
  });
};

/**
 * InngestTestEngine cannot end a step.waitForEvent (an unmocked one makes it look for the step
 * forever). This runs each wait as a step.run under the same id whose result is what `resolve`
 * decides: the event, or null for a timeout, memoized as the server would. Only the
 * `async.data.<field> == "<value>"` expressions Threadline uses are understood.
 */
function resolveWaits(resolve: WaitResolver) {
  return (ctx: TestContext): TestContext => {
    const waitForEvent = (id: string, opts: { event: string | { name: string }; timeout: string; if?: string }) => {
      const [, field, value] = /^async\.data\.(\w+) == (".*")$/.exec(opts.if ?? "") ?? [];
      if (opts.if && !field) throw new Error(`unsupported waitForEvent expression in tests: ${opts.if}`);
      const event = typeof opts.event === "string" ? opts.event : opts.event.name;
      return ctx.step.run(id, () =>
        resolve({
          id,
          event,
          timeout: opts.timeout,
          match: field ? { field, value: JSON.parse(value!) as string } : undefined,
        }),
      );
    };
    return { ...ctx, step: { ...ctx.step, waitForEvent } } as TestContext;
  };
}

/**
 * Records the id of every step.run the function reaches (memoized or not), once, in order, and calls
 * `beforeStep` before a step's work runs (not when its result comes from the memo): tests stop the
 * database, count steps or fail a step (StepFault) there.
 */
function observeSteps(stepIds: string[], beforeStep?: (id: string) => Promise<void>, memoIds: string[] = []) {
  return (ctx: TestContext): TestContext => {
    const run = ctx.step.run;
    // This context serves one replay: the k-th call of an id in it is the one Inngest memoizes as `<id>:<k>`.
    const calls = new Map<string, number>();
    const observed = ((id: string, fn: () => unknown) => {
      // The engine replays the function once per step: each id is recorded where it was first reached.
      if (!stepIds.includes(id)) stepIds.push(id);
      const k = calls.get(id) ?? 0;
      calls.set(id, k + 1);
      const memoId = k === 0 ? id : `${id}:${k}`;
      if (!memoIds.includes(memoId)) memoIds.push(memoId);
      return run(id, async () => {
        await beforeStep?.(id);
        return fn();
      });
    }) as typeof run;
    return { ...ctx, step: { ...ctx.step, run: observed } } as TestContext;
  };
}

/**
 * Inngest's serve handler gives every execution fresh instances of the client's and the function's
 * middleware; InngestTestEngine only the client's. This runs the function's middleware too, so a
 * test executes what production executes.
 */
export function withFunctionMiddleware(fn: InngestFunction.Like): InngestFunction.Like {
  type Cls = new (args: { client: unknown }) => unknown;
  type Execution = { partialOptions: Record<string, unknown> };
  const original = fn as unknown as {
    client: { middleware?: Cls[] };
    opts: { middleware?: Cls[] };
    createExecution: (opts: Execution) => unknown;
  };
  const withMiddleware = Object.create(fn) as typeof original;
  withMiddleware.createExecution = (opts) => {
    const middleware = [...(original.client.middleware ?? []), ...(original.opts.middleware ?? [])];
    const middlewareInstances = middleware.map((Middleware) => new Middleware({ client: original.client }));
    return original.createExecution({ ...opts, partialOptions: { ...opts.partialOptions, middlewareInstances } });
  };
  return withMiddleware as unknown as InngestFunction.Like;
}

/**
 * Thrown from a beforeStep callback, fails the step as its own work would (a transient fault, a
 * run killed or cancelled at that step): the run sees a failed step. Anything else a test's
 * callback throws is the test's failure (see testFailures).
 */
export class StepFault extends Error {}

/**
 * What a test's own callbacks throw: the engine runs them inside steps, so it would take their
 * errors (a failed expect too) for a failed step, which a test that does not look at the run's
 * error would pass. `own` wraps a callback so its errors are kept, then thrown on as the step's
 * (the run goes on as it would on a failed step); execute rejects with the first once the run
 * ended. A StepFault is a step's failure by intent, not kept.
 */
function testFailures() {
  const failures: unknown[] = [];
  const own =
    <A extends unknown[], R>(callback: (...args: A) => Promise<R>, stepFaults = false) =>
    async (...args: A): Promise<R> => {
      try {
        return await callback(...args);
      } catch (error) {
        if (!(stepFaults && error instanceof StepFault)) failures.push(error);
        throw error;
      }
    };
  return { failures, own };
}

export type Memo = InngestTestEngine.MockedStep[];

export type Execution = {
  result: unknown;
  error: unknown;
  /** Every step that succeeded, JSON round-tripped as the real engine hands them back. */
  memo: Memo;
  runId: string;
  /** Events the run sent with step.sendEvent in this execution. */
  sentEvents: SentEvent[];
  /** The id of every step the run reached, in order (step.run, and the inference, sendEvent and waitForEvent steps). */
  stepIds: string[];
  /** Like stepIds, with each repeat of an id as Inngest memoizes it (`<id>:<k>` for its k-th repeat). */
  memoIds: string[];
  /** The ids of the step.ai.infer calls the run made: requests the Inngest server would send to the model. */
  aiInferSteps: string[];
};

export type ExecuteOptions = {
  memo?: Memo;
  runId?: string;
  /**
   * The attempt Inngest reports for the step this execution runs (ctx.attempt: 0, then 1 on its
   * first retry…); the test engine itself always says 0. Pass 1 with an earlier execution's memo
   * to retry the step that failed in it.
   */
  attempt?: number;
  /** How each step.waitForEvent ends (default: waitForEventOnBus, in virtual time); what it throws fails execute. */
  waits?: WaitResolver;
  /** Called before a step's work runs (not for memoized steps); a StepFault it throws fails the step, anything else execute. */
  beforeStep?: (id: string) => Promise<void>;
};

/**
 * Executes a function for one event. Pass `memo` and `runId` from an earlier execution to
 * retry the same run (its succeeded steps are not run again); omit them for a fresh run. Rejects
 * with what a test's callback (waits, beforeStep, an onSentEvents observer) threw, once the run
 * ended.
 */
export async function execute(
  fn: InngestFunction.Like,
  // ts: when the event was sent (default: now, as the test engine stamps it).
  event: { name: string; data: Record<string, unknown>; id?: string; ts?: number },
  options: ExecuteOptions = {},
): Promise<Execution> {
  const runId = options.runId ?? `run-${randomUUID()}`;
  const sentEvents: SentEvent[] = [];
  const stepIds: string[] = [];
  const memoIds: string[] = [];
  const aiInferSteps: string[] = [];
  const { failures, own } = testFailures();
  const waits = options.waits ? own(options.waits) : waitForEventOnBus;
  const beforeStep = options.beforeStep && own(options.beforeStep, true);
  const engine = new InngestTestEngine({
    function: withFunctionMiddleware(fn),
    events: [{ id: event.id ?? `event-${randomUUID()}`, ...event }],
    transformCtx: (ctx) => ({
      ...resolveWaits(waits)(
        recordSentEvents(
          sentEvents,
          failures,
        )(inferOverHttp(runId, aiInferSteps)(observeSteps(stepIds, beforeStep, memoIds)(ctx))),
      ),
      attempt: options.attempt ?? 0,
    }),
  });
  const output = (await engine.execute({ steps: options.memo ?? [] })) as unknown as {
    result?: unknown;
    error?: unknown;
    state: Record<string, Promise<unknown>>;
  };
  const memo: Memo = [];
  for (const [hashedId, pending] of Object.entries(output.state)) {
    const value = await pending.then(
      (data) => ({ ok: true as const, data }),
      () => ({ ok: false as const }),
    );
    if (value.ok) {
      const json = value.data === undefined ? undefined : JSON.parse(JSON.stringify(value.data));
      memo.push({ id: hashedId, idIsHashed: true, handler: () => json });
    }
  }
  if (failures.length > 0) throw failures[0];
  return { result: output.result, error: output.error, memo, runId, sentEvents, stepIds, memoIds, aiInferSteps };
}

/**
 * The memo of a run killed right after step `stepId` did its work but before Inngest stored its
 * result: every step reached before it, and neither it nor anything after it.
 */
export function memoBefore(run: Execution, stepId: string): Memo {
  const at = run.stepIds.indexOf(stepId);
  if (at < 0) throw new Error(`the run never reached step ${stepId}`);
  const earlier = new Set(run.stepIds.slice(0, at).map((id) => InngestExecutionEngine._internals.hashId(id)));
  return run.memo.filter((step) => earlier.has(step.id));
}

/** Runs an onFailure handler the way Inngest does once a run has failed for good. */
export async function executeFailureHandler(
  fn: InngestFunction.Like,
  failed: {
    runId: string;
    event: { name: string; data: Record<string, unknown> };
    error: { name: string; message: string };
  },
) {
  const asFailure = Object.create(fn) as {
    createExecution: (opts: { partialOptions: Record<string, unknown> }) => unknown;
  };
  asFailure.createExecution = (opts) =>
    (fn as unknown as typeof asFailure).createExecution({
      ...opts,
      partialOptions: { ...opts.partialOptions, handlerKind: "failure" },
    });
  const sentEvents: SentEvent[] = [];
  const failures: unknown[] = [];
  const engine = new InngestTestEngine({
    function: asFailure as unknown as InngestFunction.Like,
    events: [
      {
        name: "inngest/function.failed",
        data: { function_id: "threadline-chat-turn", run_id: failed.runId, error: failed.error, event: failed.event },
      },
    ],
    transformCtx: (ctx) => recordSentEvents(sentEvents, failures)(mockCtx(ctx)),
  });
  const output = await engine.execute();
  if (failures.length > 0) throw failures[0];
  return { ...output, sentEvents };
}
