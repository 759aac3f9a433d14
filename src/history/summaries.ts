import type pg from "pg";
import { summaryId } from "./ids.js";
import { SUMMARY_AGENT_NAME, type HistoryRow } from "./messages.js";
import { sanitizeText } from "./safe-text.js";
import * as sql from "./sql.js";
import { checkOwnedThread, readHistory } from "./store.js";

/**
 * Progressive summaries: history reads send a thread's summary in place of the turns it covers,
 * and report how far the summary lags behind the window so the chat turn can ask for a new one.
 */

/** Messages outside the window that may go unsummarized before a turn asks for a summary. */
export const SUMMARIZE_AFTER_MESSAGES = 20;

export type SummaryLag = {
  /** Sequence number of the user message where the window begins: turns before it are outside. */
  windowStart: number;
  /** Current-path messages outside the window that the summary does not cover (counting stops at the limit asked for). */
  unsummarized: number;
};

export type HistoryRead = { rows: HistoryRow[]; summaryLag: SummaryLag };

/**
 * The history window (readHistory), preceded by the thread's summary when the summary ends
 * before the window begins, and how many older messages the summary does not cover yet.
 */
export async function readHistoryWithSummary(
  db: pg.Pool,
  input: Parameters<typeof readHistory>[1] & { countUnsummarizedUpTo: number },
): Promise<HistoryRead> {
  const rows = await readHistory(db, input);
  const oldest = rows.find((row) => row.kind === "user" || row.kind === "agent");
  const { rows: state } = await db.query<{
    window_start: string;
    covers_through_turn_seq: string | null;
    text: string | null;
    updated_at: Date | null;
    unsummarized: number;
  }>(sql.selectSummaryState, [input.threadId, input.beforeSeq, oldest?.id ?? null, input.countUnsummarizedUpTo]);
  const { window_start, covers_through_turn_seq, text, updated_at, unsummarized } = state[0]!;
  const windowStart = Number(window_start);
  const summaryLag = { windowStart, unsummarized };
  if (covers_through_turn_seq === null || Number(covers_through_turn_seq) >= windowStart) return { rows, summaryLag };
  const summary: HistoryRow = {
    id: summaryId(input.threadId, Number(covers_through_turn_seq)),
    kind: "summary",
    agentName: SUMMARY_AGENT_NAME,
    content: { text },
    createdAt: updated_at!.toISOString(),
  };
  return { rows: [summary, ...rows], summaryLag };
}

export type SummarySourceMessage = { turnSeq: number; kind: HistoryRow["kind"]; agentName: string; content: unknown };

export type SummarySource = {
  previous: { text: string; coversThrough: number } | null;
  /** Whole turns, oldest first, after what the previous summary covers and before the window. */
  messages: SummarySourceMessage[];
};

/** What a summarizer reads: the summary so far and the oldest turns it does not cover yet. */
export async function readSummarySource(
  db: pg.Pool,
  input: { threadId: string; userId: string; beforeSeq: number; maxMessages: number },
): Promise<SummarySource> {
  const { threadId, userId, beforeSeq, maxMessages } = input;
  await checkOwnedThread(db, threadId, userId);
  const current = (await db.query<{ covers_through_turn_seq: string; text: string }>(sql.selectSummary, [threadId])).rows[0];
  const previous = current ? { text: current.text, coversThrough: Number(current.covers_through_turn_seq) } : null;
  const { rows } = await db.query<{ turn_seq: string; kind: HistoryRow["kind"]; agent_name: string; content: unknown }>(
    sql.selectMessagesToSummarize,
    [threadId, previous?.coversThrough ?? 0, beforeSeq, maxMessages],
  );
  return {
    previous,
    messages: rows.map((row) => ({ turnSeq: Number(row.turn_seq), kind: row.kind, agentName: row.agent_name, content: row.content })),
  };
}

/**
 * Stores a summary built on `extends` (the previous summary's extent, null for the first).
 * Returns false when another summarizer got there first: its summary stays. The text is
 * model-written: NUL and lone surrogates become U+FFFD (sanitizeText) so PostgreSQL takes it.
 */
export async function storeSummary(
  db: pg.Pool,
  input: { threadId: string; coversThrough: number; text: string; extends: number | null },
): Promise<{ stored: boolean }> {
  const { threadId, coversThrough } = input;
  const text = sanitizeText(input.text);
  const result =
    input.extends === null
      ? await db.query(sql.insertSummary, [threadId, coversThrough, text])
      : await db.query(sql.updateSummary, [threadId, coversThrough, text, input.extends]);
  return { stored: result.rowCount === 1 };
}
