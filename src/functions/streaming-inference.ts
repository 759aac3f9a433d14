import { Middleware, NonRetriableError } from "inngest";
import type pg from "pg";
import { isRetriableModelFailure } from "../agents/model-errors.js";
import { streamCompletion, type ModelCall } from "../agents/streamed-completion.js";
import { answeringModel, asksForTools, costOf, type PriceTable, providerOf, reportedUsage } from "../agents/usage.js";
import { clearTurnRetrying, recordTurnRetrying } from "../history/turn-retrying.js";
import { type PendingUsage, recordUsage, type UsageRecord } from "../history/usage.js";
import { logger } from "../platform/logger.js";
import { deltaWriter } from "../stream/delta-writer.js";
import { describeFailure } from "./failure-message.js";
import type { ModelInference } from "./model-inference.js";

/** INFERENCE: who calls the model — the Inngest server (gateway) or this process, streaming (stream). */
export type Inference = "gateway" | "stream";

/** Where a turn's streamed text goes: the turn names its AgentKit state, whose threadId is the log's thread. */
export type InferenceStream = { writeTo: (state: { threadId?: string | undefined }) => void };

/**
 * A turn's gateway inference usage that its answer's store records (PendingUsage): a final
 * answer's (one that asks for no tool). `flush` records it in its own step instead, for a run that
 * goes on to another inference or ends without storing its answer (AgentKit rejected it, a later
 * step failed); the turn calls it when its network has run, whether or not it threw.
 */
export type InferenceUsage = PendingUsage & { flush: () => Promise<void> };

/** Under INFERENCE=stream (each attempt records its own) and outside turns: nothing is ever pending. */
const NOTHING_PENDING: InferenceUsage = {
  pending: () => undefined,
  stored: () => undefined,
  flush: async () => undefined,
};

type StepTools = Middleware.StepTools;
type InferInput = { model: ModelCall; body: Record<string, unknown> };

/**
 * Whose turn an inference belongs to: the ids both turn events carry (a new thread takes its first
 * message's id). Read on every request of a run, so by hand rather than with a schema.
 */
function turnEvent(data: unknown): { userId: string; messageId: string; threadId?: string } | undefined {
  if (typeof data !== "object" || data === null) return undefined;
  const { userId, messageId, threadId } = data as Record<string, unknown>;
  if (typeof userId !== "string" || typeof messageId !== "string") return undefined;
  if (threadId !== undefined && typeof threadId !== "string") return undefined;
  return threadId === undefined ? { userId, messageId } : { userId, messageId, threadId };
}

/** What an inference's usage is recorded with: the turn's ids, the run, and the price table. */
type UsageContext = {
  db: pg.Pool;
  prices: PriceTable;
  userId: string;
  messageId: string;
  threadId: string;
  runId: string;
};

/**
 * How a turn's inferences run. AgentKit takes its step tools from Inngest's async context, which
 * holds the function's context object: this middleware (fresh for every request) gives that
 * context a `step.ai.infer` of its own under INFERENCE=stream, and `inferenceStream` in both modes
 * so the turn's code is the same in both.
 *
 * Under `stream` each inference is a step.run under the step id step.ai.infer would have had (the
 * k-th inference with the same id gets `<id>:<k>`, as Inngest numbers repeated ids) that calls the
 * provider with streaming on, writes the text to the thread's event log as it arrives, tagged with
 * the step's attempt (deltaWriter), and returns the provider's answer as the non-streaming call
 * would have: AgentKit, the memo, retries and history see no difference.
 *
 * Under `gateway` the Inngest server calls the model, retries a failed call as often as the
 * function's `retries` say and hands the function only the last attempt's AIGatewayError, thrown
 * where step.ai.infer is awaited (docs/engine.md). A turn (which passes `turn`) makes each attempt
 * a step.invoke of the model-inference function instead, which the server does not retry: one
 * provider call per attempt, each failure shown as turn.retrying before the next (gatewayRetries).
 * Other functions' inferences stay step.ai.infer and fail with the server's last error, as before.
 *
 * With a price table (the turn functions), every inference's usage goes to the ledger
 * (src/history/usage.ts) with its turn, once per attempt. Under `stream` the inference step records
 * it itself, also for an attempt that failed after the provider reported it (billed all the same).
 * Under `gateway` an answer that asks for tools has its usage recorded by the step
 * `usage.<step id>` right after the inference returned, before AgentKit reads the answer. A final
 * answer's usage is left pending (`inferenceUsage`): the turn's answer store records it in its own
 * statement (history.append-results), whatever becomes of the answer; when anything else comes
 * first (another inference, a throw, a run that stores nothing) `usage.<step id>` records it then,
 * so an answer AgentKit rejects is counted too. The same key either way: recorded once. A failed
 * attempt (an invoked run whose step.ai.infer failed) reports no usage to the SDK.
 */
export function inferenceMiddleware(
  db: pg.Pool,
  inference: Inference,
  prices?: PriceTable,
  turn?: { attempts: number; modelInference: ModelInference },
) {
  return class InferenceMiddleware extends Middleware.BaseMiddleware {
    readonly id = "threadline/inference";

    override transformFunctionInput(arg: Middleware.TransformFunctionInputArgs) {
      let thread: { threadId?: string | undefined } = {};
      const inferenceStream: InferenceStream = {
        writeTo: (state) => {
          thread = state;
        },
      };
      const { step, runId, attempt } = arg.ctx;
      // An event its trigger's schema refuses is refused by the SDK after this, before any inference.
      const event = prices ? turnEvent(arg.ctx.event.data) : undefined;
      const usage = (): UsageContext | undefined =>
        prices && event
          ? {
              db,
              prices,
              userId: event.userId,
              messageId: event.messageId,
              threadId: thread.threadId ?? event.threadId ?? event.messageId,
              runId,
            }
          : undefined;
      const calls = new Map<string, number>();
      // The function replays from the top on every request, so the k-th call of an id is always the same inference.
      const stepIdOf = (id: string) => {
        const k = calls.get(id) ?? 0;
        calls.set(id, k + 1);
        return k === 0 ? id : `${id}:${k}`;
      };

      // Nothing to record (not a turn): the Inngest server's step.ai.infer as it is.
      if (inference === "gateway" && !event)
        return { ...arg, ctx: { ...arg.ctx, inferenceStream, inferenceUsage: NOTHING_PENDING } };
      if (inference === "gateway") {
        const retrying =
          turn === undefined
            ? undefined
            : gatewayRetries({ db, step, runId, maxAttempts: turn.attempts, modelInference: turn.modelInference });
        // Derived from memoized answers at the same points of every replay: the same on each.
        let pending: UsageRecord | undefined;
        const inferenceUsage: InferenceUsage = {
          pending: () => pending,
          stored: () => {
            pending = undefined;
          },
          flush: async () => {
            const record = pending;
            pending = undefined;
            if (record) await step.run(`usage.${record.stepId}`, () => recordUsage(db, record));
          },
        };
        const gatewayInfer = async (id: string, input: InferInput) => {
          // A final answer followed by another inference (the pair network's reviewer) is recorded first.
          await inferenceUsage.flush();
          const stepId = stepIdOf(id);
          const answer: unknown = retrying
            ? await retrying(id, stepId, input)
            : await step.ai.infer(id, input as Parameters<StepTools["ai"]["infer"]>[1]);
          const ledger = usage();
          const record =
            ledger &&
            usageRecord(ledger, { stepId, key: `${runId}:${stepId}`, attempt: 0, latencyMs: null }, input, {
              answer,
              failed: false,
            });
          if (record && asksForTools(input.model.format, answer))
            await step.run(`usage.${stepId}`, () => recordUsage(db, record));
          else pending = record;
          return answer;
        };
        const gatewayStep = { ...step, ai: { ...step.ai, infer: gatewayInfer } } as unknown as StepTools;
        return { ...arg, ctx: { ...arg.ctx, inferenceStream, inferenceUsage, step: gatewayStep } };
      }

      const infer = (id: string, { model, body }: InferInput) => {
        const stepId = stepIdOf(id);
        return step.run(stepId, () =>
          streamInference({ db, threadId: thread.threadId, runId, stepId, attempt, model, body, usage: usage() }),
        );
      };
      const streamingStep = { ...step, ai: { ...step.ai, infer } } as unknown as StepTools;
      return { ...arg, ctx: { ...arg.ctx, inferenceStream, inferenceUsage: NOTHING_PENDING, step: streamingStep } };
    }
  };
}

/** The pause before each further attempt of a gateway inference. */
const GATEWAY_RETRY_BACKOFF_SECONDS = [10, 30, 60, 120] as const;

/**
 * A turn's gateway inference, attempt by attempt. Each attempt is a step.invoke of the
 * model-inference function (one provider call: it has no retries), handed only the request body.
 * Attempt 1 keeps the id the inference always had (`<id>`; a run in flight across the deploy finds
 * its memoized step.ai.infer answer there, the same provider response the invoke returns). When
 * an attempt throws an AIGatewayError the provider may get over (not a 4xx other than 408/429),
 * the failure is recorded as turn.retrying with when the next attempt starts
 * (`<id>:retrying-<n>`), the run sleeps that long (`<id>:backoff-<n>`) and attempt n is an invoke
 * of its own (`<id>:retry-<n>`); after a retried attempt succeeds the turn is running again
 * (`<id>:retried`). `<id>` is the inference's memo id: its step id, or `<step id>:<k>` for the k-th
 * repeat, as the SDK numbers it. The last failure is thrown as it came, so the run fails with its
 * cause.
 */
function gatewayRetries(input: {
  db: pg.Pool;
  step: StepTools;
  runId: string;
  maxAttempts: number;
  modelInference: ModelInference;
}) {
  const { db, step, runId, maxAttempts, modelInference } = input;
  const invoke = step.invoke as unknown as (
    id: string,
    opts: { function: ModelInference; data: { body: Record<string, unknown> } },
  ) => Promise<unknown>;
  const attemptOnce = (stepId: string, { body }: InferInput) =>
    invoke(stepId, { function: modelInference, data: { body } });
  // `memoId`: the caller's numbering of repeated ids (stepIdOf), the one the usage step uses too.
  return async (id: string, memoId: string, call: InferInput) => {
    for (let attempt = 1; ; attempt += 1) {
      try {
        const answer = await attemptOnce(attempt === 1 ? id : `${memoId}:retry-${attempt}`, call);
        if (attempt > 1) await step.run(`${memoId}:retried`, () => clearTurnRetrying(db, runId));
        return answer;
      } catch (error) {
        if (!isGatewayFailure(error) || attempt >= maxAttempts || !isRetriableModelFailure(error.message)) throw error;
        const next = attempt + 1;
        const seconds = GATEWAY_RETRY_BACKOFF_SECONDS[Math.min(attempt, GATEWAY_RETRY_BACKOFF_SECONDS.length) - 1]!;
        const recorded = await step.run(`${memoId}:retrying-${next}`, () =>
          recordTurnRetrying(db, runId, `turn.retrying:${memoId}:${next}`, {
            attempt: next,
            maxAttempts,
            cause: describeFailure(error),
            nextAttemptAt: new Date(Date.now() + seconds * 1_000).toISOString(),
          }),
        );
        // A turn that ended meanwhile (stopped, failed, cancelled) gets no further model call.
        if (!recorded) throw new NonRetriableError(TURN_ENDED_ERROR, { cause: error });
        await step.sleep(`${memoId}:backoff-${next}`, `${seconds}s`);
      }
    }
  };
}

/**
 * The error a failed attempt throws: the SDK's StepError named after the server's AIGatewayError
 * (the invoked run's error, which the server hands the invoking step as it came: docs/engine.md).
 */
const isGatewayFailure = (error: unknown): error is Error => error instanceof Error && error.name === "AIGatewayError";

/**
 * The run ends here once its turn has ended without it — the user stopped it (the stop stored what
 * was streamed), or it was cancelled or failed — and no retry or later inference may call the model
 * for it again. Inngest's cancellation may land after this step began (a step that executes runs to
 * its end).
 */
export const TURN_ENDED_ERROR =
  "This turn ended while the model was answering (the user stopped it, or it was cancelled): the text streamed before is what stays, and the model is not called again for it.";

async function streamInference(
  input: {
    db: pg.Pool;
    threadId: string | undefined;
    runId: string;
    stepId: string;
    attempt: number;
    usage: UsageContext | undefined;
  } & InferInput,
) {
  const { db, threadId, runId, stepId, attempt, model, body } = input;
  const started = performance.now();
  let reported: unknown;
  const ledger = input.usage;
  const recordAttempt = async (failed: boolean, answer?: unknown) => {
    if (!ledger) return;
    await recordInferenceUsage(
      ledger,
      { stepId, key: `${runId}:${stepId}:${attempt}`, attempt, latencyMs: Math.round(performance.now() - started) },
      { model, body },
      { answer: answer ?? { usage: reported }, failed },
    );
  };
  // Text that cannot be logged fails the step: the model is stopped at once rather than left to answer for nothing.
  const stop = new AbortController();
  const unlogged = (error: unknown) =>
    stop.abort(
      new Error(
        `The answer's text could not be written to the thread's event log while it streamed: ${error instanceof Error ? error.message : String(error)}`,
        { cause: error },
      ),
    );
  // Without a thread (it is known once the user's message is stored) there is no log to write to.
  const writer = threadId ? deltaWriter(db, { threadId, runId, stepId, attempt }, unlogged) : undefined;
  const signal = writer ? AbortSignal.any([stop.signal, writer.ended]) : stop.signal;
  const answer = await streamCompletion({
    model,
    body,
    signal,
    onText: (text) => writer?.push(text),
    onUsage: (usage) => {
      reported = usage;
    },
  }).catch(async (error: unknown) => {
    // Billed though it failed: recorded under this attempt's key, before the step fails and is retried.
    await recordAttempt(true).catch((recordError: unknown) =>
      logger.warn({ err: recordError, runId, stepId }, "usage of a failed inference not recorded"),
    );
    if (writer?.ended.aborted) throw new NonRetriableError(TURN_ENDED_ERROR);
    // The text that arrived before the failure is logged (a retry supersedes it); the step fails with the model's cause.
    await writer
      ?.finish()
      .catch((writeError: unknown) =>
        logger.warn({ err: writeError, runId, stepId }, "streamed text of a failed inference not logged"),
      );
    throw error;
  });
  await writer?.finish();
  if (writer?.ended.aborted) {
    await recordAttempt(true);
    throw new NonRetriableError(TURN_ENDED_ERROR);
  }
  await recordAttempt(false, answer);
  return answer;
}

/**
 * Records one inference attempt's usage, if the provider reported any (usageRecord). One statement.
 */
async function recordInferenceUsage(
  context: UsageContext,
  attempt: { stepId: string; key: string; attempt: number; latencyMs: number | null },
  input: InferInput,
  outcome: { answer: unknown; failed: boolean },
) {
  const record = usageRecord(context, attempt, input, outcome);
  if (record) await recordUsage(context.db, record);
}

/**
 * One inference attempt's usage record, if the provider reported any usage: the model that
 * answered (else the one asked for), its provider, and the cost by the price table.
 */
function usageRecord(
  context: UsageContext,
  attempt: { stepId: string; key: string; attempt: number; latencyMs: number | null },
  { model, body }: InferInput,
  { answer, failed }: { answer: unknown; failed: boolean },
): UsageRecord | undefined {
  const usage = reportedUsage(model.format, answer);
  if (!usage) return undefined;
  const name = answeringModel(answer) ?? (typeof body.model === "string" ? body.model : model.format);
  const { prices, userId, messageId, threadId, runId } = context;
  return {
    userId,
    messageId,
    threadId,
    runId,
    ...attempt,
    ...usage,
    provider: providerOf(model.format),
    model: name,
    costUsd: costOf(prices, name, usage),
    failed,
  };
}
