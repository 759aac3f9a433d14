import { lastRefusal } from "./busy-sql.js";
import type { HistoryRow } from "./messages.js";
import { insertUsage } from "./usage-sql.js";

/**
 * The statements of store.ts, each with the row type it returns: creating or checking a thread,
 * a turn's two writes (history.append-user-message, which also reads the history window of a
 * turn with none ahead, and history.append-results), the history read (history.get), and the
 * reads behind regenerate, the answer variants and the debug view.
 *
 * Thread order is (turn_seq, seq): turn_seq is the seq of the user message a row belongs to.
 * Each history step of a turn is one statement (one round trip, atomic on its own); the two that
 * write call PL/pgSQL functions (src/history/schema/functions, one file each), which take
 * the thread's row lock first and then read what committed before it.
 *
 * The statements of a turn's history steps have a name each (`…Name`): node-postgres then parses
 * and plans them once per connection and afterwards only executes them. Planning history.get took
 * longer than running it (0.9 vs 0.5 ms on a 100-message thread).
 */

export const insertThread = `
  INSERT INTO threads (id, user_id) VALUES ($1, $2)
  ON CONFLICT (id) DO NOTHING
  RETURNING id`;

export const selectThreadOwner = `
  SELECT user_id FROM threads WHERE id = $1`;
export type SelectThreadOwnerRow = { user_id: string };

/**
 * history.append-user-message in one statement: the thread's owner checked (a new thread created,
 * named after its first message, only when nothing refuses), the user message stored once, the
 * run recorded as a turn. Source: src/history/schema/functions/threadline_begin_turn.sql.
 * Returns one row: a refusal code, or the message's seq, stored text, the turn's variant and status,
 * and whether an unfinished turn is ahead of it (the lookup history.find-earlier-turn would make,
 * race-free under the thread's lock: a turn on an idle thread skips that step).
 * $10: the busy policy (raises TL409 for reject while another turn is unfinished: busy.ts).
 * $11: read the history window ($12–$14: selectHistoryWindow's $3–$5), returned in the window
 * columns when the turn runs with no turn ahead (null otherwise): that turn takes no history.get step.
 * $15: when the run's event was sent (refusal user_erased: a message sent before its user's erasure).
 */
export const beginTurn = `
  SELECT refusal, message_seq, stored_text, variant, status, skip_reason, turn_ahead,
    window_rows, window_start, summary_through, summary_text, summary_updated_at, unsummarized
  FROM threadline_begin_turn($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`;
/** The prepared name of beginTurn (history.append-user-message). */
export const beginTurnName = "history.begin-turn";
export type BeginTurnRow = {
  refusal: string | null;
  message_seq: string;
  stored_text: string;
  variant: number;
  status: "running" | "skipped";
  skip_reason: string | null;
  turn_ahead: boolean | null;
  /** The history window, or null (not asked for, a turn ahead, skipped, refused): SelectHistoryWindowRow's. */
  window_rows: HistoryRow[] | null;
  window_start: string | null;
  summary_through: string | null;
  summary_text: string | null;
  summary_updated_at: Date | null;
  unsummarized: number | null;
};

/**
 * history.append-results in one statement: the answer stored (off the current path, the turn
 * superseded, when its user message left the path meanwhile) and the turn completed; nothing for
 * a turn ended by another hand (stopped, cancelled, failed). Source:
 * src/history/schema/functions/threadline_store_answer.sql.
 * Returns one row: a refusal code, or rows inserted and the turn's status; for a stored answer,
 * whether a later turn of the thread is unfinished (it may wait for this run's turn.finished) and
 * whether the thread is untitled (title-thread wants the event), both read under the thread's lock.
 */
export const storeAnswer = `
  SELECT refusal, inserted, status, later_unfinished, untitled
  FROM threadline_store_answer($1, $2, $3, $4, $5, $6, $7, $8, $9)`;
/** The prepared name of storeAnswer (history.append-results). */
export const storeAnswerName = "history.store-answer";
export type StoreAnswerRow = {
  refusal: string | null;
  inserted: number;
  status: "completed" | "superseded" | "stopped" | "cancelled" | "failed";
  later_unfinished: boolean | null;
  untitled: boolean | null;
};

/**
 * storeAnswer that also records the usage of the inference that produced the answer ($10–$25: the
 * usage insert's $1–$16), in the same statement whatever the store's outcome (a refusal, a turn
 * ended by another hand: the model was billed all the same). The usage's key makes it idempotent,
 * also against a `usage.<step id>` step memoized before (the row that step wrote stays the one).
 */
export const storeAnswerWithUsage = `
  WITH usage AS (${insertUsage.replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + 9}`)})
  ${storeAnswer.trim()}`;
/** The prepared name of storeAnswerWithUsage (history.append-results of an answer whose usage it records). */
export const storeAnswerWithUsageName = "history.store-answer-with-usage";

/**
 * What POST /api/chat checks before sending the event: the owner of the thread the message goes
 * to ($1, or the message's own id for a new thread), whether that id is a deleted thread's, and
 * what the message id already names.
 */
export const selectSendable = `
  SELECT t.user_id AS owner, m.thread_id AS message_thread_id, m.kind AS message_kind, m.content ->> 'text' AS message_text,
         EXISTS (SELECT 1 FROM thread_tombstones d WHERE d.thread_id = target.id) AS deleted,
         EXISTS (SELECT 1 FROM message_tombstones d WHERE d.thread_id = target.id AND d.message_id = $2::uuid) AS message_deleted,
         ${lastRefusal("target.id", "$2")} AS refused_run_id
  FROM (SELECT coalesce($1::uuid, $2::uuid) AS id) target
  LEFT JOIN threads t ON t.id = target.id
  LEFT JOIN messages m ON m.id = $2::uuid`;
export type SelectSendableRow = {
  owner: string | null;
  message_thread_id: string | null;
  message_kind: string | null;
  message_text: string | null;
  /** The thread's id is tombstoned (migration 0016): the turn's first statement would refuse it. */
  deleted: boolean;
  /** The message id was deleted with its branch (migration 0040): the turn's first statement would refuse it. */
  message_deleted: boolean;
  /** The run that last refused the message (busy reject, after the route's check), if any. */
  refused_run_id: string | null;
};

/**
 * history.get in one statement (threadline_history_window, which threadline_begin_turn reads too
 * for a turn with no turn ahead; an SQL function the planner inlines): the thread's owner, the current path before the user message at
 * $2 limited to the last $3 user messages (and everything after each; NULL: no limit), plus, when
 * $4, the system and summary rows older than that window; and the thread's summary with how many
 * current-path messages lie after what it covers and before where the window's turns begin
 * (counting stops at $5, so the check costs the same however far behind the summary is).
 * No row: the thread does not exist.
 *
 * Reads only the rows it returns, through messages_path_user_idx, messages_path_idx and
 * messages_path_system_idx, however long the thread. The window start is used as a scalar
 * subquery, not joined: the planner then estimates the turn_seq range as narrow and keeps the
 * index scan; joined, it guessed a third of the thread and, on long threads, chose a sequential
 * scan of every message (40x slower at 100,000). Rows come back as one JSON array, dates as
 * milliseconds since the epoch (what the step output carries: shorter than ISO strings), in
 * thread order. json, not jsonb: json_agg appends each row's text where jsonb_agg built a binary
 * document and printed it again, and to_char per row cost as much (together a third of the read).
 * The window's rows are read once: one aggregate both builds the array and finds where the turns
 * begin (a CTE read twice is stored first, and each read is another scan), and each row is the
 * LATERAL subquery's columns, named as the keys, which json_agg prints cheaper than a
 * json_build_object per row (together an eighth of the statement's CPU).
 */
export const selectHistoryWindow = `
  SELECT user_id, rows, window_start, covers_through_turn_seq, summary_text, summary_updated_at, unsummarized
  FROM threadline_history_window($1, $2, $3, $4, $5)`;
/** The prepared name of selectHistoryWindow (history.get). */
export const selectHistoryWindowName = "history.read-window";
export type SelectHistoryWindowRow = {
  user_id: string;
  rows: HistoryRow[];
  window_start: string;
  covers_through_turn_seq: string | null;
  summary_text: string | null;
  summary_updated_at: Date | null;
  unsummarized: number;
};

/** The thread's latest turn that ran (not a skipped re-run), for the debug view. */
export const selectLatestTurn = `
  SELECT run_id, message_id, kind, variant, status, error, context, started_at, finished_at
  FROM turns WHERE thread_id = $1 AND status <> 'skipped'
  ORDER BY started_at DESC LIMIT 1`;
export type SelectLatestTurnRow = {
  run_id: string;
  message_id: string;
  kind: string;
  variant: number;
  status: string;
  error: string | null;
  context: unknown;
  started_at: Date;
  finished_at: Date | null;
};

/** How many messages of each kind the thread holds, on and off its current path. */
export const countThreadMessages = `
  SELECT kind, count(*) FILTER (WHERE on_path)::int AS on_path, count(*)::int AS stored
  FROM messages WHERE thread_id = $1 GROUP BY kind`;
export type CountThreadMessagesRow = { kind: string; on_path: number; stored: number };

/** A message of a thread, with the thread's owner: what a regenerate request is checked against. */
export const selectThreadMessage = `
  SELECT t.user_id, m.id, m.kind, m.content, m.on_path
  FROM threads t
  LEFT JOIN messages m ON m.id = $2 AND m.thread_id = t.id
  WHERE t.id = $1`;
export type SelectThreadMessageRow = {
  user_id: string;
  id: string | null;
  kind: string | null;
  content: { text?: string } | null;
  on_path: boolean | null;
};

/** Every answer variant of a user message, oldest variant first, each in its stored order. */
export const selectAnswerVariants = `
  SELECT id, variant, position, agent_name, content, on_path, stopped, created_at
  FROM messages WHERE answers = $1
  ORDER BY variant, position`;
export type SelectAnswerVariantsRow = {
  id: string;
  variant: number;
  agent_name: string;
  content: unknown;
  on_path: boolean;
  stopped: boolean;
  created_at: Date;
};
