/**
 * Thread titles written by the model: what a title is written from and its one-statement store.
 * Imports: pg, messages.ts, safe-text.ts, threads-sql.ts.
 */
import type pg from "pg";
import { assistantTexts, textContent } from "./messages.js";
import { sanitizeText } from "./safe-text.js";
import * as sql from "./threads-sql.js";

/** What a thread's title is written from, or why there is nothing to write. */
export type TitleSource =
  | { status: "ready"; question: string; answer: string }
  | { status: "titled" | "no-answer" | "not-found" };

/**
 * The thread's first question and its current answer's text, unless the thread already has a
 * title (the user's or an earlier model title) or its first question has no answer yet.
 */
export async function readTitleSource(db: pg.Pool, threadId: string): Promise<TitleSource> {
  const row = (await db.query<sql.SelectTitleSourceRow>(sql.selectTitleSource, [threadId])).rows[0];
  if (!row) return { status: "not-found" };
  if (row.titled) return { status: "titled" };
  if (row.question === null) return { status: "no-answer" };
  const answer = (row.answer ?? []).flatMap(assistantTexts).join("\n").trim();
  if (!answer) return { status: "no-answer" };
  return { status: "ready", question: textContent.parse(row.question).text, answer };
}

/**
 * Stores the model's title, in one statement that checks the thread is still untitled: a title
 * the user set meanwhile (or an earlier model title) is never overwritten. The text is
 * model-written: NUL and lone surrogates become U+FFFD so PostgreSQL takes it.
 */
export async function storeModelTitle(db: pg.Pool, threadId: string, title: string): Promise<{ stored: boolean }> {
  const result = await db.query(sql.storeModelTitle, [threadId, sanitizeText(title)]);
  return { stored: result.rowCount === 1 };
}
