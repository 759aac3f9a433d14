import type { AgentResult, State, StateData } from "@inngest/agent-kit";
import { Middleware } from "inngest";
import type pg from "pg";
import { z } from "zod";
import {
  chatMessageSent,
  inngest,
  type StepTools,
  threadDeleted,
  turnFinished,
  type TurnFinished,
  turnStopRequested,
  userDeleted,
} from "../../inngest.config.js";
import { ModelErrorMiddleware } from "../agents/model-errors.js";
import { DEFAULT_PRICES, type PriceTable } from "../agents/usage.js";
import { skippedAnswerId, turnEndedAs, turnSkipReason } from "../agents/run-state.js";
import { textOf } from "../history/messages.js";
import { clearTurnRetrying, recordTurnRetrying } from "../history/turn-retrying.js";
import { cancelTurn, failTurn, type SentMessage } from "../history/turns.js";
import type { ModelChoice } from "../agents/model.js";
import { describeFailure } from "./failure-message.js";
import { createModelInference } from "./model-inference.js";
import { type Inference, inferenceMiddleware } from "./streaming-inference.js";

/*
 * A turn's life around its steps (turn-runner.ts), for both turn functions: how a run of one is
 * configured (retries, cancelOn, onFailure, middleware), how it ends — finished (its outcome and
 * turn.finished), failed (onFailure), stopped or deleted (cancelOn), cancelled (the
 * turn-cancelled function) — and how its retries are shown while it runs (turn.retrying).
 */

export const CHAT_TURN_ID = "chat-turn";

export const REGENERATE_ID = "regenerate";

/** Retries per step: enough to ride out a model or database blip, few enough to fail in minutes. */
export const TURN_RETRIES = 4 as const;

/**
 * The turn functions' cancelOn for a stop: a stop of the turn answering the same user message
 * (both trigger events carry messageId) cancels the run, so no further model call or step runs
 * for a turn that is already recorded as stopped. A step executing when the cancellation lands
 * still runs to its end; its late answer is dropped by threadline_store_answer
 * (src/history/schema/functions).
 * The run's inngest/function.cancelled finds the turn no longer running and records nothing more.
 */
export const cancelOnStop = [{ event: turnStopRequested, if: "async.data.messageId == event.data.messageId" }];

/**
 * The turn functions' cancelOn for deletion, beside the stop's: a deleted thread's running and
 * queued runs are cancelled (thread/deleted, sent by the delete route, retention and a user's
 * erasure), and so is every run of an erased user (user/deleted). A chat event names its thread by
 * threadId, or, for a new thread, by its first message's id (the thread takes that id): one entry
 * each, so no expression reads a field the event may lack. Matching on the user too keeps one
 * user's deletion from touching a run that names the same id for another user (which its first
 * step refuses anyway). A run cancelled between steps makes no further model call; one that is
 * queued never starts. Whatever slips past (an event re-delivered or replayed later) is refused by
 * the thread's tombstone in the turn's first statement (migration 0016).
 */
export const cancelOnDeletion = [
  { event: threadDeleted, if: "async.data.threadId == event.data.threadId && async.data.userId == event.data.userId" },
  { event: threadDeleted, if: "async.data.threadId == event.data.messageId && async.data.userId == event.data.userId" },
  { event: userDeleted, if: "async.data.userId == event.data.userId" },
];

/**
 * cancelOn of the functions that run beside a turn and carry its user (summaries, memory
 * extraction): a deleted thread's or erased user's run is cancelled, so a retry of its model call
 * (the request memoized before the deletion) never sends the thread's words to a model again.
 */
export const cancelBesideTurnOnDeletion = [
  { event: threadDeleted, if: "async.data.threadId == event.data.threadId && async.data.userId == event.data.userId" },
  { event: userDeleted, if: "async.data.userId == event.data.userId" },
];

/**
 * Checkpoint mode: the steps a request runs are reported to Inngest together (before the model's
 * invoke, with the run's end, at the latest after maxInterval), not one HTTP call each. A crash in
 * between reruns those steps, which are idempotent like any retry. bufferedSteps: more than a turn
 * runs between its invokes.
 */
export const TURN_CHECKPOINTING = { bufferedSteps: 10, maxInterval: "1s" } as const;

/** Middleware as a tuple, so the handler's context is typed with what each adds (inferenceStream). */
const inOrder = <const T extends Middleware.Class[]>(...middleware: T) => middleware;

/**
 * The options both turn functions share, beside their id, name, trigger and idempotency. Under
 * INFERENCE=gateway each inference attempt invokes the model-inference function (built here from
 * the same configuration as the one createFunctions serves: step.invoke names it by its id).
 */
export const turnOptions = ({
  db,
  inference,
  prices,
  model,
}: {
  db: pg.Pool;
  inference?: Inference | undefined;
  prices?: PriceTable | undefined;
  model: ModelChoice;
}) => ({
  // No per-thread concurrency key: turns of a thread are ordered by the durable wait before
  // history.get (src/history/turn-waits.ts), so a stop frees the thread at once (docs/engine.md).
  retries: TURN_RETRIES,
  checkpointing: TURN_CHECKPOINTING,
  // The user's stop (POST /api/threads/:threadId/stop) ends the run; so do the thread's deletion
  // and the user's erasure.
  cancelOn: [...cancelOnStop, ...cancelOnDeletion],
  onFailure: recordTurnFailure(db),
  middleware: inOrder(
    ModelErrorMiddleware,
    inferenceMiddleware(db, inference ?? "gateway", prices ?? DEFAULT_PRICES, {
      attempts: TURN_RETRIES + 1,
      modelInference: createModelInference({ model }),
    }),
    turnRetryMiddleware(db),
  ),
});

/**
 * What a turn function's run returns: shown in the dev server's run output. "skipped": the run
 * wrote nothing (a re-run of an answered message; `answerId` names the stored answer's first
 * result). "stopped", "cancelled", "failed": the turn ended so by another hand while the run went
 * on (the user stopped it, …); the answer it still reached was not stored.
 */
export function turnOutcome(state: State<StateData>, messageId: string) {
  const skipped = turnSkipReason(state);
  if (skipped) {
    const answerId = skippedAnswerId(state);
    return {
      threadId: state.threadId,
      messageId,
      status: "skipped" as const,
      reason: skipped,
      ...(answerId !== undefined && { answerId }),
    };
  }
  return {
    threadId: state.threadId,
    messageId,
    status: turnEndedAs(state) ?? ("completed" as const),
    answer: answerText(state.results.at(-1)),
  };
}

/** The text of an agent result's answer (a turn's final answer, a summary). */
export function answerText(result: AgentResult | undefined): string {
  return (result?.output ?? [])
    .filter((m) => m.type === "text" && m.role === "assistant")
    .map((m) => (m.type === "text" ? textOf(m.content) : ""))
    .join("\n");
}

/**
 * Tells a later turn of the thread that waits for this run (src/history/turn-waits.ts) that it
 * may go on. The event id is derived from the run, so however often a run's finish is reported
 * (its own end, onFailure, its cancellation), Inngest keeps one event.
 */
export const announceTurnFinished = (step: StepTools, finished: TurnFinished) =>
  step.sendEvent("turn.finished", turnFinishedEvent(finished));

/** A turn's finished event: its id is derived from the run, whoever reports the finish. */
export const turnFinishedEvent = (finished: TurnFinished) =>
  turnFinished.create(finished, { id: `turn-finished-${finished.runId}` });

type FailureContext = {
  event: { data: { run_id: string; event?: { name?: unknown; ts?: unknown; data?: unknown } } };
  error: Error;
  step: StepTools;
};

/** The ids a turn's event carries: a chat turn's thread is its first message's id when absent. */
const turnEventIds = z.object({ messageId: z.uuid(), threadId: z.uuid().optional(), userId: z.string().optional() });

/** A chat message, not an edit: its run creates its thread when new (threadline_begin_turn), as of `ts`, its sending. */
const threadCreatingEvent = z.object({
  name: z.literal(chatMessageSent.name),
  ts: z.number(),
  data: z.object({ edits: z.never().optional() }),
});

/**
 * The message the event of a failed or cancelled run (as Inngest hands it over in
 * inngest/function.failed and .cancelled: `data.event`) was sent for; undefined for an event
 * refused by its schema, which never started a turn: nobody waits for it.
 */
function sentMessage(event: { name?: unknown; ts?: unknown; data?: unknown } | undefined): SentMessage | undefined {
  const parsed = turnEventIds.safeParse(event?.data);
  if (!parsed.success) return undefined;
  const creating = threadCreatingEvent.safeParse(event);
  return {
    ...parsed.data,
    threadId: parsed.data.threadId ?? parsed.data.messageId,
    sentAt: creating.success ? creating.data.ts : undefined,
  };
}

/**
 * The onFailure handler of turn functions: once a run has used up its retries (or failed
 * non-retriably), its turn is recorded as failed with the run id and a readable cause (the
 * provider's status and reason, no credentials), and a later turn waiting for it is released.
 * The user's message stays stored, so a regenerate can complete the turn later. A run that failed
 * before it began a turn (stored nothing) logs its failure for the message instead, on its user's
 * thread, which a new thread's first message creates (turns.ts failTurn): a stream waiting for the
 * message's run ends, and the message can be sent again.
 */
const recordTurnFailure =
  (db: pg.Pool) =>
  async ({ event, error, step }: FailureContext) => {
    const runId = event.data.run_id;
    const sent = sentMessage(event.data.event);
    await step.run("turn.record-failure", () => failTurn(db, runId, describeFailure(error), sent));
    if (!sent) return;
    await announceTurnFinished(step, { threadId: sent.threadId, runId, messageId: sent.messageId, status: "failed" });
  };

/** Inngest names a function `<app id>-<function id>` in its lifecycle events. */
const turnFunctionIds = [CHAT_TURN_ID, REGENERATE_ID].map((id) => `${inngest.id}-${id}`);

/**
 * Inngest calls no onFailure for a cancelled run, so without this its turn would stay running and
 * every later turn of the thread would wait for it. Records the turn as cancelled and releases
 * the thread at once. A run cancelled after its turn finished changes nothing. A run cancelled
 * before it began a turn (an operator cancelling queued runs, from the dashboard or the REST API)
 * logs its cancellation for its message instead, as a failure before it began does (turns.ts
 * cancelTurn): a stream waiting for the message's run ends, and the message can be sent again.
 * No later turn waits for a run without a turn: nothing to release. A run cancelled by its
 * thread's deletion or its user's erasure logs nothing: those end the streams themselves.
 */
export function createTurnCancellation({ db }: { db: pg.Pool }) {
  return inngest.createFunction(
    {
      id: "turn-cancelled",
      name: "Record a cancelled turn",
      triggers: [
        {
          event: "inngest/function.cancelled",
          if: turnFunctionIds.map((id) => `event.data.function_id == ${JSON.stringify(id)}`).join(" || "),
        },
      ],
      retries: 4,
    },
    async ({ event, step }) => {
      const runId = String(event.data.run_id);
      const sent = sentMessage(event.data.event);
      const turn = await step.run("turn.record-cancelled", () => cancelTurn(db, runId, sent));
      if (!turn) return { runId, status: "no running turn" as const };
      if ("unbegun" in turn) return { runId, status: "cancelled before it began a turn" as const, ...turn };
      await announceTurnFinished(step, { ...turn, runId, status: "cancelled" });
      return { runId, status: "cancelled" as const, ...turn };
    },
  );
}

/**
 * While a turn's step is retried, clients see it: each failed attempt that Inngest will retry is
 * recorded on the running turn and logged as `turn.retrying {attempt, maxAttempts, cause}` (the
 * attempt that comes next, counted from 1), once per failed attempt and never after the turn
 * ended (src/history/turn-retrying.ts). When the retried step succeeds, the turn is running again.
 *
 * The SDK reports every attempt of a step it executes (step.run: the history steps, and each
 * inference under INFERENCE=stream). Under INFERENCE=gateway an inference attempt is a step.invoke
 * of model-inference, which the SDK does not execute and the server does not retry: the inference
 * middleware retries it and writes its turn.retrying (streaming-inference.ts, docs/engine.md).
 */
function turnRetryMiddleware(db: pg.Pool) {
  return class TurnRetryMiddleware extends Middleware.BaseMiddleware {
    readonly id = "threadline/turn-retrying";

    override async onStepError({ ctx, error, isFinalAttempt, stepInfo }: Middleware.OnStepErrorArgs) {
      if (isFinalAttempt) return;
      const maxAttempts = ctx.maxAttempts ?? TURN_RETRIES + 1;
      const attempt = ctx.attempt + 2;
      await recordTurnRetrying(db, ctx.runId, `turn.retrying:${stepInfo.hashedId}:${attempt}`, {
        attempt,
        maxAttempts,
        cause: describeFailure(error),
      });
    }

    override async onStepComplete({ ctx, stepInfo }: Middleware.OnStepCompleteArgs) {
      if (ctx.attempt > 0 && !stepInfo.memoized) await clearTurnRetrying(db, ctx.runId);
    }
  };
}
