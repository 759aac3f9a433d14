import type { State } from "@inngest/agent-kit";
import type { EndedTurnStatus } from "../history/store.js";
import type { SummaryLag } from "../history/summaries.js";

/**
 * What the history adapter tells the agents about this run, through AgentKit's run-scoped
 * `state.kv` (memory for one run, rebuilt identically on every re-entry from memoized steps).
 */
const SKIP = "threadline.turn.skip";
const SKIPPED_ANSWER = "threadline.turn.skipped-answer";
const SKIPPED_AT_START = "threadline.turn.skipped-at-start";
const PRIOR_RESULTS = "threadline.history.prior-results";
const SUMMARY_LAG = "threadline.history.summary-lag";
const USER_TEXT = "threadline.turn.user-text";
const ENDED = "threadline.turn.ended";

type AnyState = State<Record<string, unknown>>;

/**
 * The turn writes nothing (a re-run of an answered message): the agents must not run.
 * `answerId`: the stored answer the message already has (its first result), when it has one.
 * `atStart`: the run found it out as it began, so its turn was never running and no client follows
 * it: nothing is logged for it (the message's one stream.ended stays the answer's).
 */
export const markTurnSkipped = (
  state: AnyState,
  reason: string,
  skipped: { answerId?: string | undefined; atStart?: boolean } = {},
) => {
  state.kv.set(SKIP, reason);
  if (skipped.answerId !== undefined) state.kv.set(SKIPPED_ANSWER, skipped.answerId);
  if (skipped.atStart) state.kv.set(SKIPPED_AT_START, true);
};
export const turnSkippedAtStart = (state: AnyState): boolean => state.kv.get(SKIPPED_AT_START) === true;
export const turnSkipReason = (state: AnyState): string | undefined => state.kv.get(SKIP);
export const skippedAnswerId = (state: AnyState): string | undefined => state.kv.get(SKIPPED_ANSWER);

/** The turn ended by another hand while its run went on: the answer it reached was not stored. */
export const markTurnEnded = (state: AnyState, status: EndedTurnStatus) => state.kv.set(ENDED, status);
export const turnEndedAs = (state: AnyState): EndedTurnStatus | undefined => state.kv.get(ENDED);

/** How many of state.results came from before this turn (stored or client-sent history). */
export const setPriorResultCount = (state: AnyState, count: number) => state.kv.set(PRIOR_RESULTS, count);
export const priorResultCount = (state: AnyState): number => state.kv.get(PRIOR_RESULTS) ?? 0;

/** How far the thread's summary lags behind the history window, as the history read found it. */
export const setSummaryLag = (state: AnyState, lag: SummaryLag) => state.kv.set(SUMMARY_LAG, lag);
export const summaryLag = (state: AnyState): SummaryLag | undefined => state.kv.get(SUMMARY_LAG);

/** The stored text of the user message the turn answers: what the model receives as the current message. */
export const setUserMessageText = (state: AnyState, text: string) => state.kv.set(USER_TEXT, text);
export const userMessageText = (state: AnyState): string | undefined => state.kv.get(USER_TEXT);
