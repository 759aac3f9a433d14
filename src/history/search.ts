import type pg from "pg";
import * as sql from "./search-sql.js";

/**
 * Full-text search over one user's messages across their threads: what they wrote and what the
 * assistant answered, best match first, a page at a time from a cursor.
 * Imports: pg and search-sql.ts.
 */

export const DEFAULT_SEARCH_PAGE_SIZE = 20;
export const MAX_SEARCH_PAGE_SIZE = 50;
/** Longer queries are refused: websearch syntax ORs and phrases grow the work with the query. */
export const MAX_SEARCH_QUERY_LENGTH = 200;

/** Where a page ends in the order (rank DESC, id DESC); rank is numeric text, exact. */
export type SearchPosition = { rank: string; id: string };

/** A position as an opaque cursor: clients pass it back, never build it. */
const encodeSearchCursor = ({ rank, id }: SearchPosition): string => Buffer.from(`${rank}~${id}`).toString("base64url");

/** The position a cursor stands for, or undefined when it is not one this API returned. */
export function decodeSearchCursor(cursor: string): SearchPosition | undefined {
  if (!/^[A-Za-z0-9_-]{1,160}$/.test(cursor)) return undefined;
  const match = /^(\d{1,20}(?:\.\d{1,60})?)~([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/.exec(
    Buffer.from(cursor, "base64url").toString("latin1"),
  );
  return match ? { rank: match[1]!, id: match[2]! } : undefined;
}

type SearchHit = {
  threadId: string;
  messageId: string;
  role: "user" | "assistant";
  createdAt: string;
  /** Higher is better; comparable within one query only. */
  rank: number;
  /** The matching passage, HTML-escaped, each match inside <mark>…</mark>. */
  snippet: string;
  /** False for a message off the thread's current path (only with includeOffPath). */
  onPath: boolean;
};

export type SearchPage = { results: SearchHit[]; hasMore: boolean; nextCursor: string | null };

export type SearchRequest = {
  userId: string;
  /** websearch_to_tsquery syntax: words, "a phrase", or, -excluded. */
  query: string;
  limit: number;
  /** Also search answers a regenerate replaced and the turns it took off the path. */
  includeOffPath: boolean;
  after?: SearchPosition | undefined;
};

/** rank is numeric, which node-postgres returns as text. */
/** One page of the user's matching messages; a query of only stop words matches nothing. */
export async function searchMessages(
  db: pg.Pool,
  { userId, query, limit, includeOffPath, after }: SearchRequest,
): Promise<SearchPage> {
  // One row past the page says whether there is more.
  const { rows } = await db.query<sql.SearchMessagesRow>(sql.searchMessages, [
    userId,
    query,
    includeOffPath,
    after?.rank ?? null,
    after?.id ?? null,
    limit + 1,
  ]);
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    results: page.map(toHit),
    hasMore: rows.length > limit,
    nextCursor: rows.length > limit && last ? encodeSearchCursor({ rank: last.rank, id: last.id }) : null,
  };
}

function toHit(row: sql.SearchMessagesRow): SearchHit {
  return {
    threadId: row.thread_id,
    messageId: row.id,
    role: row.kind === "agent" ? "assistant" : "user",
    createdAt: row.created_at.toISOString(),
    rank: Number(row.rank),
    snippet: highlighted(row.snippet),
    onPath: row.on_path,
  };
}

const HTML_ESCAPES: Record<string, string> = { "&": "&amp;", '"': "&quot;", "'": "&#39;" };

/**
 * The snippet as HTML a client may render as is: the text escaped, ts_headline's match markers
 * (U+E000/U+E001) as <mark> tags, and the text's own < > (U+0001/U+0002 while ts_headline ran, see
 * search-sql.ts) as entities.
 */
const highlighted = (snippet: string): string =>
  snippet
    .replace(/[&"']/g, (char) => HTML_ESCAPES[char]!)
    .replaceAll("\uE000", "<mark>")
    .replaceAll("\uE001", "</mark>")
    .replaceAll("\u0001", "&lt;")
    .replaceAll("\u0002", "&gt;");
