import { Middleware, NonRetriableError } from "inngest";
import type pg from "pg";
import { streamCompletion, type ModelCall } from "../agents/streamed-completion.js";
import { logger } from "../platform/logger.js";
import { deltaWriter } from "../stream/delta-writer.js";

/** INFERENCE: who calls the model — the Inngest server (gateway) or this process, streaming (stream). */
export type Inference = "gateway" | "stream";

/** Where a turn's streamed text goes: the turn names its AgentKit state, whose threadId is the log's thread. */
export type InferenceStream = { writeTo: (state: { threadId?: string | undefined }) => void };

type StepTools = Middleware.StepTools;
type InferInput = { model: ModelCall; body: Record<string, unknown> };

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
 * would have: AgentKit, the memo, retries and history see no difference. Under `gateway` nothing
 * changes: the Inngest server calls the model.
 */
export function inferenceMiddleware(db: pg.Pool, inference: Inference) {
  return class InferenceMiddleware extends Middleware.BaseMiddleware {
    readonly id = "threadline/inference";

    override transformFunctionInput(arg: Middleware.TransformFunctionInputArgs) {
      let thread: { threadId?: string | undefined } = {};
      const inferenceStream: InferenceStream = {
        writeTo: (state) => {
          thread = state;
        },
      };
      if (inference === "gateway") return { ...arg, ctx: { ...arg.ctx, inferenceStream } };

      const { step, runId, attempt } = arg.ctx;
      const calls = new Map<string, number>();
      const infer = (id: string, { model, body }: InferInput) => {
        // The function replays from the top on every request, so the k-th call of an id is always the same inference.
        const k = calls.get(id) ?? 0;
        calls.set(id, k + 1);
        const stepId = k === 0 ? id : `${id}:${k}`;
        return step.run(stepId, () =>
          streamInference({ db, threadId: thread.threadId, runId, stepId, attempt, model, body }),
        );
      };
      const streamingStep = { ...step, ai: { ...step.ai, infer } } as unknown as StepTools;
      return { ...arg, ctx: { ...arg.ctx, inferenceStream, step: streamingStep } };
    }
  };
}

/**
 * The run ends here once its turn has ended without it — the user stopped it (the stop stored what
 * was streamed), or it was cancelled or failed — and no retry or later inference may call the model
 * for it again. Inngest's cancellation may land after this step began (a step that executes runs to
 * its end).
 */
export const TURN_ENDED_ERROR =
  "This turn ended while the model was answering (the user stopped it, or it was cancelled): the text streamed before is what stays, and the model is not called again for it.";

async function streamInference(
  input: { db: pg.Pool; threadId: string | undefined; runId: string; stepId: string; attempt: number } & InferInput,
) {
  const { db, threadId, runId, stepId, attempt, model, body } = input;
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
  const answer = await streamCompletion({ model, body, signal, onText: (text) => writer?.push(text) }).catch(
    async (error: unknown) => {
      if (writer?.ended.aborted) throw new NonRetriableError(TURN_ENDED_ERROR);
      // The text that arrived before the failure is logged (a retry supersedes it); the step fails with the model's cause.
      await writer
        ?.finish()
        .catch((writeError: unknown) =>
          logger.warn({ err: writeError, runId, stepId }, "streamed text of a failed inference not logged"),
        );
      throw error;
    },
  );
  await writer?.finish();
  if (writer?.ended.aborted) throw new NonRetriableError(TURN_ENDED_ERROR);
  return answer;
}
