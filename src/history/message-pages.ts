import type pg from "pg";
import { type AnswerFeedback, feedbackOf } from "./feedback.js";
import * as sql from "./message-pages-sql.js";
import { checkOwnedThread } from "./store.js";
import type { TurnUsage } from "./usage.js";

/**
 * A thread's current path, read one page at a time on the thread order (turn_seq, seq). A page is
 * found from a position, never an offset: a page read later, after new messages were appended,
 * neither repeats nor skips a message, and a page costs the same however long the thread grows.
 * Imports: pg, feedback.ts, store.ts and message-pages-sql.ts.
 */

/** Where a message stands in the thread order. */
export type Position = { turnSeq: string; seq: string };

/** Before every message of a thread (`after` it reads from the start). */
const START: Position = { turnSeq: "0", seq: "0" };
/** After every message of a thread (`before` it reads the newest page). */
const END: Position = { turnSeq: "9223372036854775807", seq: "9223372036854775807" };

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 200;

/** A position as an opaque cursor: clients pass it back, never build it. */
const encodeCursor = ({ turnSeq, seq }: Position): string => Buffer.from(`${turnSeq}.${seq}`).toString("base64url");

/** The position a cursor stands for, or undefined when it is not one this API returned. */
export function decodeCursor(cursor: string): Position | undefined {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(cursor)) return undefined;
  const match = /^(\d{1,18})\.(\d{1,18})$/.exec(Buffer.from(cursor, "base64url").toString("latin1"));
  return match ? { turnSeq: match[1]!, seq: match[2]! } : undefined;
}

type ThreadMessage = {
  id: string;
  role: "user" | "assistant" | "system" | "summary";
  agentName: string;
  content: unknown;
  createdAt: string;
  /** For an agent result: the user message it answers and its variant; `stopped`: cut short by a stop. */
  answers?: string;
  variant?: number;
  stopped?: true;
  /** For an agent result: the owner's rating of it, null while there is none. */
  feedback?: AnswerFeedback | null;
  /**
   * For an agent result: what its turn used and cost, summed over the turn's model calls (every
   * result of one turn shows the same); null when the provider reported no usage.
   */
  turnUsage?: TurnUsage | null;
  /** For a user message: how many answer variants exist, and its latest turn. */
  variantCount?: number;
  turn?: { status: string; runId: string; error: string | null; approvals?: sql.PendingToolCall[] } | null;
  /**
   * The conversation tree: a user message's edits (the messages that follow the same message), an
   * answer's variants (each named by its first result's id), in the order they were made; `position`
   * (from 1) is this one's. PUT …/messages/:id/current switches to one.
   */
  siblings?: Siblings;
};

type Siblings = { count: number; position: number; ids: string[] };

function siblings(row: sql.PageRow): Siblings | undefined {
  const ids = row.sibling_ids;
  if (!ids) return undefined;
  const position = row.kind === "agent" ? row.variant_position! : ids.indexOf(row.id) + 1;
  return { count: ids.length, position, ids };
}

export type MessagePage = {
  /** In thread order (oldest first). */
  messages: ThreadMessage[];
  /** More messages lie beyond this page in the direction read: older ones (newest page, `before`), newer ones (`after`). */
  hasMore: boolean;
  /** `before` this cursor: the older messages. */
  previous: string;
  /** `after` this cursor: the newer messages (also those appended later). */
  next: string;
};

export type PageRequest = {
  threadId: string;
  userId: string;
  limit: number;
  /** At most one of them; neither: the newest page. */
  before?: Position | undefined;
  after?: Position | undefined;
};

/**
 * One page of the user's thread: the `limit` messages nearest to the cursor in the direction read
 * (before it, after it, or the newest ones), or a refusal when the thread is not the user's.
 */
export async function readMessagePage(
  db: pg.Pool,
  { threadId, userId, limit, before, after }: PageRequest,
): Promise<MessagePage> {
  await checkOwnedThread(db, threadId, userId);
  const forward = after !== undefined;
  const from = after ?? before ?? END;
  // One row past the page says whether there is more in that direction.
  const { rows } = await db.query<sql.PageRow>(forward ? sql.selectPageAfter : sql.selectPageBefore, [
    threadId,
    from.turnSeq,
    from.seq,
    limit + 1,
  ]);
  const nearest = rows.slice(0, limit);
  const inOrder = forward ? nearest : nearest.reverse();
  const first = inOrder[0];
  const last = inOrder.at(-1);
  const edge = from === END ? START : from;
  const feedback = await feedbackOf(
    db,
    threadId,
    inOrder.flatMap((row) => (row.kind === "agent" ? [row.id] : [])),
  );
  return {
    messages: inOrder.map((row) => ({
      ...toMessage(row),
      ...(row.kind === "agent" ? { feedback: feedback.get(row.id) ?? null } : {}),
    })),
    hasMore: rows.length > limit,
    previous: encodeCursor(first ? { turnSeq: first.turn_seq, seq: first.seq } : edge),
    next: encodeCursor(last ? { turnSeq: last.turn_seq, seq: last.seq } : edge),
  };
}

function toMessage(row: sql.PageRow): ThreadMessage {
  return {
    id: row.id,
    role: row.kind === "agent" ? "assistant" : row.kind,
    agentName: row.agent_name,
    content: row.content,
    createdAt: row.created_at.toISOString(),
    ...(row.kind === "agent"
      ? {
          answers: row.answers!,
          variant: row.variant!,
          ...(row.stopped ? { stopped: true as const } : {}),
          turnUsage: row.turn_usage,
        }
      : {}),
    ...(row.sibling_ids ? { siblings: siblings(row)! } : {}),
    ...(row.kind === "user"
      ? {
          variantCount: row.variant_count!,
          turn: row.turn_status
            ? {
                status: row.turn_status,
                runId: row.turn_run_id,
                error: row.turn_error,
                ...(row.turn_approvals ? { approvals: row.turn_approvals } : {}),
              }
            : null,
        }
      : {}),
  };
}
