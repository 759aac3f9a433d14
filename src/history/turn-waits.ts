import { NonRetriableError } from "inngest";
import type pg from "pg";
import { type StepTools, turnFinished } from "../../inngest.config.js";
import { durably } from "./durable.js";
import { findEarlierTurn, PATIENCE_MINUTES, SKIPPED_WHILE_WAITING } from "./turns.js";

/**
 * One turn per thread at a time. The turn functions hold no concurrency key: on the real engine an
 * in-flight AI gateway request counts as an executing step even after its run was cancelled, so a
 * per-thread key of limit 1 held a stopped thread until the cancelled inference returned
 * (docs/engine.md). The order is kept here instead: before reading the history, a turn waits
 * durably for every unfinished turn ahead of it. A wait is a step.waitForEvent on the earlier
 * run's `threadline/turn.finished` event, which costs no retry and holds no worker. The turn
 * functions send that event when a turn is skipped, or completes while a later turn of the thread
 * is unfinished (or the thread untitled: threadline_store_answer tells, under the thread's lock,
 * so a turn that begins after it never waits for it), their onFailure handler when it fails, the
 * cancellation handler when it is cancelled, the stop route when it is stopped. A turn that finds
 * no unfinished turn ahead as its message is stored (threadline_begin_turn) never comes here.
 *
 * Rounds: a lookup, then a wait of QUICK_ROUND for the first QUICK_ROUNDS rounds and WAIT_ROUND
 * after. A turn waited for is presumed lost once it has shown no finish for PATIENCE_MINUTES (the
 * clock restarts whenever the turn waited for changes, i.e. the queue moved). It is then recorded
 * as failed (the client sees why, and a regenerate answers it) and the wait goes on with the next
 * turn ahead. Completed, failed, stopped and cancelled runs all release the thread through their
 * event; this deadline only covers a run whose finish was never reported (e.g. a dev server
 * restarted with the run in memory, an onFailure that could not write). MAX_WAIT_ROUNDS bounds
 * the whole wait (about 4 hours of a thread busy ahead of this turn; two steps a round stay under
 * Inngest's 1,000 steps per run).
 * Imports: inngest, the turn.finished event (inngest.config.ts), durable.ts, turns.ts.
 */
export const QUICK_ROUND = "10s";
export const QUICK_ROUNDS = 30;
const WAIT_ROUND = "1m";
export const MAX_WAIT_ROUNDS = 265;

/** The timeout of round n's wait (from 1). */
export const roundTimeout = (round: number) => (round <= QUICK_ROUNDS ? QUICK_ROUND : WAIT_ROUND);
const SECONDS: Record<string, number> = { [QUICK_ROUND]: 10, [WAIT_ROUND]: 60 };

/** Rounds a wait from round 1 spends on one turn that never finishes before presuming it lost. */
export const PATIENCE_ROUNDS = QUICK_ROUNDS + PATIENCE_MINUTES - (QUICK_ROUNDS * SECONDS[QUICK_ROUND]!) / 60;

/** Step ids of round n: the first round's ids carry no number. */
const roundId = (base: string, round: number) => (round === 1 ? base : `${base}.${round}`);

/**
 * Waits until no unfinished turn is ahead of this run's turn on its thread. Returns the reason to
 * skip when this chat turn's message was answered meanwhile (a duplicate run of the message).
 *
 * Each round: a step looks in the database for the oldest unfinished turn ahead; none → done;
 * otherwise wait for that run's finished event, at most the round's timeout, and look again.
 * step.waitForEvent only matches events sent after the wait has started (an engine fact,
 * test/engine-contract.test.ts): an earlier turn that finishes between the lookup and the start
 * of the wait sends its event to nobody. The round's timeout and the lookup that follows every
 * wait are what catch that finish; the rounds of the first five minutes (an answer with its
 * retries) are short, so a finish missed there costs at most QUICK_ROUND. The event only makes the
 * common case immediate.
 *
 * Every decision is made from memoized step results, so replays take the same path.
 */
export async function waitForEarlierTurns(
  step: StepTools | undefined,
  db: pg.Pool,
  runId: string,
): Promise<{ skipReason?: string }> {
  // Outside an Inngest run (AgentKit called directly) there is nothing to wait with.
  if (!step) return {};
  let waitingFor: string | null = null;
  let waitedSeconds = 0;
  let abandon: string | null = null;
  for (let round = 1; round <= MAX_WAIT_ROUNDS; round += 1) {
    const found = await durably(step, roundId("history.find-earlier-turn", round), () =>
      findEarlierTurn(db, { runId, abandon }),
    );
    if (found.skipped) return { skipReason: SKIPPED_WHILE_WAITING };
    if (!found.earlier) return {};
    // A new turn ahead, or the one asked to be abandoned is alive (awaiting approval): patience restarts.
    if (found.earlier.runId !== waitingFor || found.earlier.runId === abandon) {
      waitingFor = found.earlier.runId;
      waitedSeconds = 0;
    }
    abandon = null;
    if (waitedSeconds >= PATIENCE_MINUTES * 60) {
      // The next lookup records it as failed and moves on to the turn after it.
      abandon = waitingFor;
      continue;
    }
    const timeout = roundTimeout(round);
    waitedSeconds += SECONDS[timeout]!;
    await step.waitForEvent(roundId("history.wait-for-turn", round), {
      event: turnFinished,
      timeout,
      if: `async.data.runId == ${JSON.stringify(waitingFor)}`,
    });
  }
  throw new NonRetriableError(
    `The thread stayed busy with earlier turns through ${MAX_WAIT_ROUNDS} waits (about 4 hours), so this message was not answered: regenerate it once the earlier answers are in.`,
  );
}
