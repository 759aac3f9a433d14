/**
 * The AgentKit history adapter (HistoryConfig) of a turn: creates the thread, stores the user
 * message (with its history window when no turn is ahead), else waits for earlier turns and reads
 * the window, and stores the answer, each as one durable step. Stores nothing itself: store.ts,
 * summaries.ts and turn-waits.ts do.
 * Imports: storage modules of src/history, the run-state contract of src/agents, never routes or functions.
 */
import type { AgentResult, HistoryConfig, StateData } from "@inngest/agent-kit";
import type pg from "pg";
import {
  markTurnSkipped,
  markTurnEnded,
  setPriorResultCount,
  setSummaryLag,
  setUserMessageText,
} from "../agents/run-state.js";
import type { BusyPolicy } from "./busy-policy.js";
import { durably } from "./durable.js";
import { resultId } from "./ids.js";
import { compactRow, type StoredHistoryRow, toAgentContent, toAgentResults } from "./messages.js";
import { historyWindow, type ResolvedHistoryPolicy } from "./policy.js";
import { beginTurn, storeAnswer, type StoredAnswer, type TurnKind, type TurnStart } from "./store.js";
import { readHistoryWithSummary, SUMMARIZE_AFTER_MESSAGES, type HistoryRead, withSummary } from "./summaries.js";
import { applyHistoryBudgets, type BudgetReport, type ByteBudgetReport } from "./token-budget.js";
import { waitForEarlierTurns } from "./turn-waits.js";
import type { PendingUsage } from "./usage.js";
import { setBounded } from "../platform/bounded-map.js";

/** The run a history adapter serves: one turn on one user message. */
export type TurnContext = {
  userId: string;
  /** The user message this turn answers (the client's id). */
  messageId: string;
  runId: string;
  kind: TurnKind;
  eventId?: string | undefined;
  /** When the run's event was sent (Inngest's event.ts, the same on every replay). */
  eventTime?: number | undefined;
  clientTimestamp?: string | undefined;
  policy: ResolvedHistoryPolicy;
  /** How many prior messages the client sent with the event (client-authoritative): none are read. */
  clientMessages?: number | undefined;
  /** An edit: the user message this one replaces (stored as its sibling, threadline_begin_turn). */
  edits?: string | undefined;
  /** The model the turn's agents call, recorded with the turn (feedback on its answer names it); absent when none is configured. */
  model?: { provider: string; name: string } | undefined;
  /** A chat message's busy policy: reject is refused by the first statement while another turn runs (busy.ts). */
  busy?: BusyPolicy | undefined;
  /** The usage of the inference the answer came from, when left for the answer's store to record. */
  usage?: PendingUsage | undefined;
};

/**
 * Where the turn's earlier history came from and how much of it reached the model:
 * "database" (read by history.get, or with the message on an idle thread), "client" (sent with
 * the event), or "none" (policy none, a new thread, or a re-run that answers nothing).
 */
type HistoryLoad = {
  from: "database" | "client" | "none";
  read: number;
  sent: number;
  budget?: BudgetReport;
  bytes?: ByteBudgetReport;
};

/**
 * The history window as a step returns it (history.get, or history.append-user-message for a turn
 * with no turn ahead): budgeted inside the step, so what Inngest stores is bounded, and as tuples,
 * since every later request of the run carries it (outputs memoized before hold row objects).
 */
type HistoryStepRead = Omit<HistoryRead, "rows"> & {
  rows: StoredHistoryRow[];
  read: number;
  bytes: ByteBudgetReport;
  budget?: BudgetReport;
};

function historyStepRead(read: HistoryRead, limits: { maxBytes: number; maxTokens: number | null }): HistoryStepRead {
  const budgeted = applyHistoryBudgets(read.rows, limits);
  return { ...budgeted, rows: budgeted.rows.map(compactRow), summaryLag: read.summaryLag, read: read.rows.length };
}

/** What history.append-user-message returns: the turn's start, which run began it, and the window it read, if any. */
type BegunTurn = TurnStart & { runId?: string; history?: HistoryStepRead };

/** What history.get is handed by AgentKit, and what appendUserMessage hands it for a thread AgentKit thinks new. */
type HistoryReadArgs = Pick<Parameters<NonNullable<HistoryConfig<StateData>["get"]>>[0], "state" | "step" | "threadId">;

export type TurnHistory = HistoryConfig<StateData> & {
  /** The load of this run (set from memoized steps, so the same on every replay). */
  load: () => HistoryLoad;
  /**
   * Whether an unfinished turn was ahead of this one when its message was stored; true too before
   * that, and for a start memoized before the statement reported it (memoized: same on every replay).
   */
  turnAhead: () => boolean;
  /**
   * Whether this run's threadline/turn.finished may be waited for: false only when its answer's
   * store (memoized: the same on every replay) completed the turn with no later turn of the thread
   * unfinished and the thread titled. A turn that ended otherwise (skipped, stopped, failed,
   * cancelled) always announces, as does one whose memoized store predates these fields.
   */
  finishAwaited: () => boolean;
};

/** Runs whose history a process keeps parsed, oldest dropped first: each holds at most one history step's output. */
const PARSED_HISTORIES = 100;
const parsedHistories = new Map<string, { ids: readonly string[]; results: readonly AgentResult[] }>();

/**
 * The AgentResults of a run's memoized history window (history.get's output or the begin step's).
 * A run's function replays on every request (async mode: one per step), and parsing the rows
 * again each time (zod, every string checked) is a good part of a replay's CPU. A memoized output
 * never changes for its run, so it is parsed once per run and process; each replay gets its own
 * array of the same results, frozen since every replay shares them (AgentKit only writes to the
 * results of the running turn).
 */
function historyResults(runId: string, rows: readonly StoredHistoryRow[]): AgentResult[] {
  const known = parsedHistories.get(runId);
  // The row ids too: a test engine may pin a run id across runs that read other rows.
  if (known && sameIds(known.ids, rows)) return [...known.results];
  const results = toAgentResults(rows).map((result) => {
    deepFreeze(result.output);
    deepFreeze(result.toolCalls);
    Object.freeze(result);
    return result;
  });
  setBounded(parsedHistories, runId, { ids: rows.map(rowId), results }, PARSED_HISTORIES);
  return [...results];
}

const rowId = (row: StoredHistoryRow) => (Array.isArray(row) ? row[1] : row.id);

const sameIds = (ids: readonly string[], rows: readonly StoredHistoryRow[]) =>
  ids.length === rows.length && rows.every((row, index) => rowId(row) === ids[index]);

function deepFreeze(value: unknown): void {
  if (typeof value !== "object" || value === null || Object.isFrozen(value)) return;
  Object.freeze(value);
  for (const item of Object.values(value)) deepFreeze(item);
}

/**
 * AgentKit's HistoryConfig over PostgreSQL, for one turn.
 *
 * Thread ids, per AgentKit's table (tested in test/thread-ids.test.ts):
 * - resume (threadId given): createThread keeps it; append-user-message checks its owner, and
 *   reads the window too when no unfinished turn is ahead; get returns that window, or (a turn
 *   ahead) waits for the earlier turns and loads it in history.get;
 * - new conversation (no threadId): createThread names the thread after its first message, so a
 *   re-run of the event finds the same thread; append-user-message creates it, in the same
 *   statement that stores the message, once nothing refuses; AgentKit does not call get for it,
 *   so when a follow-up naming the thread was stored first, append-user-message waits for the
 *   earlier turns and reads the history itself;
 * - without createThread, AgentKit uses a given threadId as is (fine for an existing thread), and
 *   for a new conversation makes a random UUID outside any step: a different id on every replay,
 *   naming no stored thread, so appendUserMessage refuses it. That is why createThread stays.
 *
 * Client-authoritative turns (the event carries the conversation) never reach get.
 *
 * Each hook does its database work inside its own step.run with a stable id, so Inngest retries
 * each one alone and memoizes what succeeded; everything outside the steps is deterministic and
 * is replayed on every re-entry.
 */
export function createTurnHistory(db: pg.Pool, turn: TurnContext): TurnHistory {
  // Set from the memoized append-user-message step, so it is the same on every replay.
  let started: BegunTurn | undefined;
  // Set from the memoized append-results step, likewise.
  let stored: StoredAnswer | undefined;
  // AgentKit calls get only when the event named the thread; createThread tells which (the same on every replay).
  let namedByEvent = true;
  let loaded: HistoryLoad =
    turn.clientMessages === undefined
      ? { from: "none", read: 0, sent: 0 }
      : { from: "client", read: 0, sent: turn.clientMessages };

  /** get's work: the window the begin statement read, else waits for earlier turns and reads it (history.get). */
  const readHistory = async ({ state, step, threadId }: HistoryReadArgs): Promise<AgentResult[]> => {
    if (!started) throw new Error("history.get ran before the user message was stored");
    // An empty client conversation is still the client's word: nothing is read.
    if (started.status === "skipped" || turn.clientMessages !== undefined) return [];
    // The earlier turns of the thread finish first, so their answers are part of what is read. With
    // none ahead when the message was stored (under the thread's lock), there is nothing to look for.
    // A start memoized before the begin statement reported it (a run in flight over a deploy) looks.
    const { skipReason } = started.turnAhead === false ? {} : await waitForEarlierTurns(step, db, turn.runId);
    if (skipReason) {
      started = { ...started, status: "skipped", skipReason };
      // Two chat runs of one message share its first variant: the other run stored it.
      markTurnSkipped(state, skipReason, { answerId: resultId(turn.messageId, started.variant, 0) });
      return [];
    }
    const window = historyWindow(turn.policy);
    // Policy none reads nothing: the model sees the current message alone.
    if (!window) return [];
    const beforeSeq = started.messageSeq;
    // With no turn ahead, the begin statement read the window (as history.get would have, after the
    // thread's lock): no step. A start memoized without it (a turn ahead, a run in flight over a
    // deploy, a new thread's follow-up stored first) reads it here.
    // The summary check rides on this read (in the same statement) rather than costing a step of its own.
    const read =
      started.history ??
      ((await durably(step, "history.get", async () =>
        historyStepRead(
          await readHistoryWithSummary(db, {
            threadId: threadId!,
            userId: turn.userId,
            beforeSeq,
            window,
            countUnsummarizedUpTo: SUMMARIZE_AFTER_MESSAGES + 1,
          }),
          turn.policy,
        ),
      )) as HistoryStepRead);
    setSummaryLag(state, read.summaryLag);
    const results = historyResults(turn.runId, read.rows);
    loaded = {
      from: "database",
      read: read.read,
      sent: read.rows.length,
      bytes: read.bytes,
      ...(read.budget ? { budget: read.budget } : {}),
    };
    setPriorResultCount(state, results.length);
    return results;
  };

  return {
    load: () => loaded,

    turnAhead: () => started?.turnAhead !== false,

    finishAwaited: () =>
      stored === undefined ||
      (stored.status !== "completed" && stored.status !== "superseded") ||
      stored.laterUnfinished !== false ||
      stored.untitled !== false,

    // A new thread takes its first message's id: a re-run of the same event finds the same thread.
    // No database work: append-user-message creates or checks the thread with the message.
    createThread: async ({ state }) => {
      namedByEvent = state.threadId !== undefined;
      return { threadId: state.threadId ?? turn.messageId };
    },

    appendUserMessage: async ({ state, step, userMessage, threadId }) => {
      // The window get would read from the database (AgentKit calls get for a named thread, with no
      // client conversation, when the policy reads one): the begin statement reads it along.
      const window = namedByEvent && turn.clientMessages === undefined ? historyWindow(turn.policy) : null;
      const begin = async (): Promise<BegunTurn> => {
        const { window: read, ...start } = await beginTurn(db, {
          threadId: threadId!,
          userId: turn.userId,
          message: { id: userMessage.id, text: userMessage.content, clientTimestamp: turn.clientTimestamp },
          turn: {
            runId: turn.runId,
            kind: turn.kind,
            eventId: turn.eventId,
            busy: turn.busy,
            eventTime: turn.eventTime,
          },
          // The load is known once get has run: appendResults records it.
          // An edit is named in the turn's context: threadline_begin_turn reads it from there.
          context: {
            policy: turn.policy,
            ...(turn.model ? { model: turn.model } : {}),
            ...(turn.edits ? { edits: turn.edits } : {}),
          },
          history: window ? { window, countUnsummarizedUpTo: SUMMARIZE_AFTER_MESSAGES + 1 } : undefined,
        });
        return {
          ...start,
          // Which run began the turn: a rerun from a later step finds another run's start memoized.
          runId: turn.runId,
          ...(read ? { history: historyStepRead(withSummary(threadId!, read), turn.policy) } : {}),
        };
      };
      let begun = (await durably(step, "history.append-user-message", begin)) as BegunTurn;
      // The re-run rule (docs/engine.md): a rerun from a step after this one (dev server, REST API) is
      // a new run holding the original's memo, whose "running" speaks for the original run. It begins
      // its own turn under a step id no other run has memoized, so an answered message is skipped
      // (no model call, nothing stored or logged) and an unanswered one is answered by this run.
      if (begun.runId !== undefined && begun.runId !== turn.runId) {
        begun = (await durably(step, `history.rerun-begin-turn.${turn.runId}`, begin)) as BegunTurn;
      }
      started = begun;
      // The model answers the stored words (a re-sent id with other words is refused, never answered).
      setUserMessageText(state, begun.text);
      if (begun.status === "skipped") {
        markTurnSkipped(state, begun.skipReason ?? "skipped", {
          answerId: begun.variant > 0 ? resultId(turn.messageId, begun.variant, 0) : undefined,
          atStart: true,
        });
        return;
      }
      // A new thread's first message found the thread already holding messages: a follow-up that
      // names the thread by this message's id was stored first. AgentKit calls no get for a new
      // thread, so this turn waits for the earlier turns and reads their history here, as get would.
      if (!namedByEvent && begun.messageSeq > 1) state.setResults(await readHistory({ state, step, threadId }));
    },

    get: (args) => readHistory(args),

    appendResults: async ({ state, step, newResults, threadId }) => {
      if (!started || started.status === "skipped") return;
      const { messageSeq, variant } = started;
      // Read outside the step, as the inferences left it (the same on every replay).
      const usage = turn.usage?.pending();
      // The stored form of the results is built inside the step: a replay that finds it memoized needs none.
      stored = (await durably(step, "history.append-results", () =>
        storeAnswer(db, {
          threadId: threadId!,
          userId: turn.userId,
          runId: turn.runId,
          messageId: turn.messageId,
          messageSeq,
          variant,
          detachLaterTurns: turn.kind === "regenerate",
          results: newResults.map((result, position) => ({
            id: resultId(turn.messageId, variant, position),
            agentName: result.agentName,
            content: toAgentContent(result),
          })),
          context: { history: loaded },
          usage,
        }),
      )) as StoredAnswer;
      turn.usage?.stored();
      if (stored.status !== "completed" && stored.status !== "superseded") markTurnEnded(state, stored.status);
    },
  };
}
