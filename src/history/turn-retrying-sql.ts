/** A failed attempt of a running turn, recorded and logged (threadline_turn_retrying, in src/history/schema). */
export const recordTurnRetrying = `SELECT threadline_turn_retrying($1, $2, $3) AS id`;
export type RecordTurnRetryingRow = { id: string | null };

/** The retried step succeeded: the turn is no longer retrying (only a turn that was written as retrying is touched). */
export const clearTurnRetrying = `UPDATE turns SET retrying = NULL WHERE run_id = $1 AND retrying IS NOT NULL`;
