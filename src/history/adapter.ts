import type { HistoryConfig, StateData } from "@inngest/agent-kit";
import { NonRetriableError } from "inngest";
import type pg from "pg";
import { markTurnSkipped, setPriorResultCount, setSummaryLag } from "../run-state.js";
import { HistoryRefusal } from "./errors.js";
import { resultId } from "./ids.js";
import { toAgentContent, toAgentResults } from "./messages.js";
import { readHistoryWithSummary, SUMMARIZE_AFTER_MESSAGES, type HistoryRead } from "./summaries.js";
import { beginTurn, ensureThread, storeAnswer, type HistoryWindow, type TurnKind, type TurnStart } from "./store.js";

/** The run a history adapter serves: one turn on one user message. */
export type TurnContext = {
  userId: string;
  /** The user message this turn answers (the client's id). */
  messageId: string;
  runId: string;
  kind: TurnKind;
  eventId?: string | undefined;
  clientTimestamp?: string | undefined;
  window: HistoryWindow;
};

type StepRunner = { run: <T>(id: string, fn: () => Promise<T>) => Promise<unknown> };

/**
 * AgentKit's HistoryConfig over PostgreSQL, for one turn. Each hook does its database work inside
 * its own step.run with a stable id, so Inngest retries each one alone and memoizes what
 * succeeded; everything outside the steps is deterministic and is replayed on every re-entry.
 */
export function createTurnHistory(db: pg.Pool, turn: TurnContext): HistoryConfig<StateData> {
  // Set from the memoized append-user-message step, so it is the same on every replay.
  let started: TurnStart | undefined;

  return {
    // A new thread takes its first message's id: a re-run of the same event finds the same thread.
    createThread: async ({ state, step }) => {
      const threadId = state.threadId ?? turn.messageId;
      await durably(step, "history.create-thread", () => ensureThread(db, threadId, turn.userId));
      return { threadId };
    },

    appendUserMessage: async ({ state, step, userMessage, threadId }) => {
      started = (await durably(step, "history.append-user-message", () =>
        beginTurn(db, {
          threadId: threadId!,
          userId: turn.userId,
          message: { id: userMessage.id, text: userMessage.content, clientTimestamp: turn.clientTimestamp },
          turn: { runId: turn.runId, kind: turn.kind, eventId: turn.eventId },
        }),
      )) as TurnStart;
      if (started.status === "skipped") markTurnSkipped(state, started.skipReason ?? "skipped");
    },

    get: async ({ state, step, threadId }) => {
      if (!started) throw new Error("history.get ran before the user message was stored");
      if (started.status === "skipped") return [];
      const beforeSeq = started.messageSeq;
      // The summary check rides on this read (one more indexed query) rather than costing a step of its own.
      const { rows, summaryLag } = (await durably(step, "history.get", () =>
        readHistoryWithSummary(db, {
          threadId: threadId!,
          userId: turn.userId,
          beforeSeq,
          window: turn.window,
          countUnsummarizedUpTo: SUMMARIZE_AFTER_MESSAGES + 1,
        }),
      )) as HistoryRead;
      setSummaryLag(state, summaryLag);
      const results = toAgentResults(rows);
      setPriorResultCount(state, results.length);
      return results;
    },

    appendResults: async ({ step, newResults, threadId }) => {
      if (!started || started.status === "skipped") return;
      const { messageSeq, variant } = started;
      const results = newResults.map((result, position) => ({
        id: resultId(turn.messageId, variant, position),
        agentName: result.agentName,
        content: toAgentContent(result),
      }));
      await durably(step, "history.append-results", () =>
        storeAnswer(db, {
          threadId: threadId!,
          userId: turn.userId,
          runId: turn.runId,
          messageId: turn.messageId,
          messageSeq,
          variant,
          detachLaterTurns: turn.kind === "regenerate",
          results,
        }),
      );
    },
  };
}

/** Runs storage work as a step; a refusal becomes non-retriable, anything else is retried. */
export async function durably<R>(step: unknown, id: string, work: () => Promise<R>): Promise<R> {
  const guarded = () =>
    work().catch((error: unknown) => {
      if (error instanceof HistoryRefusal) throw new NonRetriableError(error.message, { cause: error });
      throw error;
    });
  if (!step) return guarded();
  return (await (step as StepRunner).run(id, guarded)) as R;
}
