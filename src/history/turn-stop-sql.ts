/**
 * The write of stopping a turn (src/history/turn-stop.ts runs it; the turn it applies to is found
 * by runningTurn in turn-runs.ts): threadline_stop_turn (src/history/schema/functions), one
 * statement under the thread's lock.
 */

/**
 * Stops run $3's turn on thread $1 of user $2 if it still runs, storing what it streamed as one
 * result (id $4, agent $5). Returns one row: a refusal code, or the message, variant and rows stored.
 */
export const stopTurn = `
  SELECT refusal, message_id, variant, stored
  FROM threadline_stop_turn($1, $2, $3, $4, $5)`;
