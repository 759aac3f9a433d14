import { randomUUID } from "node:crypto";
import { InngestTestEngine, mockCtx } from "@inngest/test";
import type { InngestFunction } from "inngest";

// @inngest/test resolves inngest's CommonJS types, the app its ESM ones: take the context type from the test package.
type TestContext = Parameters<typeof mockCtx>[0];

type AiModelLike = {
  url?: string;
  authKey?: string;
  format: string;
  onCall?: (model: AiModelLike, body: Record<string, unknown>) => void;
};

/**
 * The Inngest server executes step.ai.infer; InngestTestEngine cannot. This turns each
 * inference into a step.run under the same id that calls the model URL over HTTP (as AgentKit's
 * own fallback does), failing the step on a non-2xx answer as the server would. It also pins
 * ctx.runId, which the engine otherwise changes on every execution although a real run keeps
 * its id across retries.
 */
export function inferOverHttp(runId: string) {
  return (rawCtx: TestContext): TestContext => {
    const ctx = mockCtx(rawCtx);
    const infer = (id: string, { model, body }: { model: AiModelLike; body: Record<string, unknown> }) =>
      ctx.step.run(id, async () => {
        const call = { ...model };
        model.onCall?.(call, body);
        const headers: Record<string, string> = { "content-type": "application/json" };
        if (call.format === "openai-chat") headers.authorization = `Bearer ${call.authKey}`;
        if (call.format === "anthropic") Object.assign(headers, { "x-api-key": call.authKey ?? "", "anthropic-version": "2023-06-01" });
        const response = await fetch(call.url ?? "", { method: "POST", headers, body: JSON.stringify(body) });
        if (!response.ok) throw new Error(`Model answered HTTP ${response.status}: ${(await response.text()).slice(0, 200)}`);
        return response.json();
      });
    return { ...ctx, runId, step: { ...ctx.step, ai: { ...ctx.step.ai, infer } } } as TestContext;
  };
}

/**
 * The Inngest server delivers what step.sendEvent sends; under the test engine there is no
 * server to send to. This turns each sendEvent into a step.run under the same id that records
 * the events, so tests see what a run sent, once, however often it is retried.
 */
export function recordSentEvents(sent: SentEvent[]) {
  return (ctx: TestContext): TestContext => {
    const sendEvent = (id: string, payload: SentEvent | SentEvent[]) =>
      ctx.step.run(id, async () => {
        const events = Array.isArray(payload) ? payload : [payload];
        sent.push(...events.map((event) => JSON.parse(JSON.stringify(event)) as SentEvent));
        return { ids: events.map(() => `sent-${randomUUID()}`) };
      });
    return { ...ctx, step: { ...ctx.step, sendEvent } } as TestContext;
  };
}

export type SentEvent = { name: string; data: Record<string, unknown> };

export type Memo = InngestTestEngine.MockedStep[];

export type Execution = {
  result: unknown;
  error: unknown;
  /** Every step that succeeded, JSON round-tripped as the real engine hands them back. */
  memo: Memo;
  runId: string;
  /** Events the run sent with step.sendEvent in this execution. */
  sentEvents: SentEvent[];
};

/**
 * Executes a function for one event. Pass `memo` and `runId` from an earlier execution to
 * retry the same run (its succeeded steps are not run again); omit them for a fresh run.
 */
export async function execute(
  fn: InngestFunction.Like,
  event: { name: string; data: Record<string, unknown>; id?: string },
  options: { memo?: Memo; runId?: string } = {},
): Promise<Execution> {
  const runId = options.runId ?? `run-${randomUUID()}`;
  const sentEvents: SentEvent[] = [];
  const engine = new InngestTestEngine({
    function: fn,
    events: [{ id: event.id ?? `event-${randomUUID()}`, ...event }],
    transformCtx: (ctx) => recordSentEvents(sentEvents)(inferOverHttp(runId)(ctx)),
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
  return { result: output.result, error: output.error, memo, runId, sentEvents };
}

/** Runs an onFailure handler the way Inngest does once a run has failed for good. */
export async function executeFailureHandler(
  fn: InngestFunction.Like,
  failed: { runId: string; event: { name: string; data: Record<string, unknown> }; error: { name: string; message: string } },
) {
  const asFailure = Object.create(fn) as { createExecution: (opts: { partialOptions: Record<string, unknown> }) => unknown };
  asFailure.createExecution = (opts) =>
    (fn as unknown as typeof asFailure).createExecution({ ...opts, partialOptions: { ...opts.partialOptions, handlerKind: "failure" } });
  const engine = new InngestTestEngine({
    function: asFailure as unknown as InngestFunction.Like,
    events: [{ name: "inngest/function.failed", data: { function_id: "threadline-chat-turn", run_id: failed.runId, error: failed.error, event: failed.event } }],
  });
  return engine.execute();
}
