import type pg from "pg";
import { summaryId } from "./ids.js";
import { SUMMARY_AGENT_NAME, type HistoryRow } from "./messages.js";
import { sanitizeText } from "./safe-text.js";
import * as sql from "./summaries-sql.js";
import { HistoryRefusal, threadNotOwned } from "./errors.js";
import { type HistoryWindowRead, readHistoryWindow } from "./store.js";

/**
 * Progressive summaries: history reads send a thread's summary in place of the turns it covers,
 * and report how far the summary lags behind the window so the chat turn can ask for a new one.
 * Imports: pg, storage modules of src/history and summaries-sql.ts.
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
 * The history window, preceded by the thread's summary when the summary ends before the window's
 * turns begin, and how many older messages the summary does not cover yet: one statement.
 */
export async function readHistoryWithSummary(
  db: pg.Pool,
  input: Parameters<typeof readHistoryWindow>[1],
): Promise<HistoryRead> {
  return withSummary(input.threadId, await readHistoryWindow(db, input));
}

/** A window read (by history.get, or by the begin statement of a turn with none ahead) with its summary row. */
export function withSummary(threadId: string, read: HistoryWindowRead): HistoryRead {
  const { rows, summary, windowStart, unsummarized } = read;
  const summaryLag = { windowStart, unsummarized };
  if (summary === null || summary.coversThrough >= windowStart) return { rows, summaryLag };
  const summaryRow: HistoryRow = {
    id: summaryId(threadId, summary.coversThrough),
    kind: "summary",
    agentName: SUMMARY_AGENT_NAME,
    content: { text: summary.text },
    createdAt: summary.updatedAt,
  };
  return { rows: [summaryRow, ...rows], summaryLag };
}

export type SummarySource = {
  previous: { text: string; coversThrough: number } | null;
  /** Whole turns, oldest first, after what the previous summary covers and before the window. */
  messages: sql.SummarySourceMessage[];
  /** The thread's path version when this was read: the summary is stored only if it is still current. */
  pathVersion: number;
};

/** What a summarizer reads, in one statement: the summary so far, the oldest turns it does not cover yet, the path version. */
export async function readSummarySource(
  db: pg.Pool,
  input: { threadId: string; userId: string; beforeSeq: number; maxMessages: number },
): Promise<SummarySource> {
  const { threadId, userId, beforeSeq, maxMessages } = input;
  const { rows } = await db.query<sql.SelectSummarySourceRow>(sql.selectSummarySource, [
    threadId,
    beforeSeq,
    maxMessages,
  ]);
  const source = rows[0];
  if (!source) throw new HistoryRefusal("thread_not_found", `Thread ${threadId} does not exist.`);
  if (source.user_id !== userId) throw threadNotOwned(threadId);
  return {
    previous:
      source.covers_through_turn_seq === null
        ? null
        : { text: source.text!, coversThrough: Number(source.covers_through_turn_seq) },
    messages: source.messages,
    pathVersion: Number(source.path_version),
  };
}

/**
 * Stores a summary built on `extends` (the previous summary's extent, null for the first), if the
 * thread's path is still the version the summary was read from (`pathVersion`). Returns false
 * when another summarizer got there first (its summary stays) or the path changed since the read
 * (a regenerate took turns off it): the next request summarizes the current path. The text is
 * model-written: NUL and lone surrogates become U+FFFD (sanitizeText) so PostgreSQL takes it.
 */
export async function storeSummary(
  db: pg.Pool,
  input: { threadId: string; coversThrough: number; text: string; extends: number | null; pathVersion: number },
): Promise<{ stored: boolean }> {
  const { rows } = await db.query<sql.StoreSummaryRow>(sql.storeSummary, [
    input.threadId,
    input.coversThrough,
    sanitizeText(input.text),
    input.extends,
    input.pathVersion,
  ]);
  return { stored: rows[0]!.stored === 1 };
}
