import type pg from "pg";
import { HistoryRefusal, threadNotOwned } from "./errors.js";
import * as sql from "./feedback-sql.js";

/**
 * A user's feedback on an answer: a thumbs up or down with an optional comment, one per answer
 * (an agent message), the thread owner's, replaceable and removable. Each write is one statement
 * (feedback-sql.ts) that checks the owner and the message kind itself.
 * Imports: pg, errors.ts and feedback-sql.ts.
 */

export type Rating = "up" | "down";

/** An answer's feedback as the messages API and the export show it. */
export type AnswerFeedback = { rating: Rating; comment: string | null; updatedAt: string };

/** The feedback as stored, with what the event announcing it carries about the answer's turn. */
export type StoredFeedback = AnswerFeedback & {
  /** Names this state of the row: the same rating sent again keeps it. */
  version: string;
  createdAt: string;
  /** The run that wrote the answer, and its model; null for an answer without a turn (imported or older rows). */
  runId: string | null;
  model: { provider: string; name: string } | null;
};

type Address = { threadId: string; answerId: string; userId: string };

/** FOREIGN KEY violation: the answer (or its thread) was deleted while the statement ran. */
const FOREIGN_KEY_VIOLATION = "23503";

/** Stores the user's rating of the answer, replacing theirs; refuses another user's thread and a message that is no answer. */
export async function putFeedback(
  db: pg.Pool,
  { threadId, answerId, userId, rating, comment }: Address & { rating: Rating; comment: string | null },
): Promise<StoredFeedback> {
  const { rows } = await db
    .query<sql.PutFeedbackRow>(sql.putFeedback, [threadId, answerId, userId, rating, comment])
    .catch((error: unknown) => {
      if ((error as { code?: string }).code === FOREIGN_KEY_VIOLATION) throw answerNotFound(threadId, answerId);
      throw error;
    });
  const row = refuseUnlessAnswer(rows[0], { threadId, answerId, userId });
  // The owner's answer always gets its row: a missing one is a fault, not the caller's mistake.
  if (row.rating === null || row.version === null || row.created_at === null || row.updated_at === null)
    throw new Error(`feedback on answer ${answerId} was not stored`);
  return {
    rating: row.rating,
    comment: row.comment,
    version: row.version,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    runId: row.run_id,
    model: row.model?.provider && row.model.name ? { provider: row.model.provider, name: row.model.name } : null,
  };
}

/** Removes the user's rating of the answer; `deleted`: there was one. Refuses as putFeedback does. */
export async function deleteFeedback(db: pg.Pool, address: Address): Promise<{ deleted: boolean }> {
  const { rows } = await db.query<sql.DeleteFeedbackRow>(sql.deleteFeedback, [
    address.threadId,
    address.answerId,
    address.userId,
  ]);
  return { deleted: refuseUnlessAnswer(rows[0], address).deleted };
}

/** The feedback on each of the thread's answers named, by answer id (answers without feedback are absent). */
export async function feedbackOf(
  db: pg.Pool,
  threadId: string,
  answerIds: string[],
): Promise<Map<string, AnswerFeedback>> {
  if (answerIds.length === 0) return new Map();
  const { rows } = await db.query<sql.FeedbackRow>(sql.selectFeedbackOf, [answerIds, threadId]);
  return new Map(
    rows.map((row) => [
      row.message_id,
      { rating: row.rating, comment: row.comment, updatedAt: row.updated_at.toISOString() },
    ]),
  );
}

const answerNotFound = (threadId: string, answerId: string) =>
  new HistoryRefusal("message_not_found", `Message ${answerId} is not a message of thread ${threadId}.`);

/** The target row, once it is the user's thread and an answer in it; the refusal otherwise. */
function refuseUnlessAnswer<Row extends { owner: string; id: string | null; kind: string | null }>(
  row: Row | undefined,
  { threadId, answerId, userId }: Address,
): Row {
  if (!row) throw new HistoryRefusal("thread_not_found", `Thread ${threadId} does not exist.`);
  if (row.owner !== userId) throw threadNotOwned(threadId);
  if (row.id === null) throw answerNotFound(threadId, answerId);
  if (row.kind !== "agent")
    throw new HistoryRefusal(
      "not_an_answer",
      `Message ${answerId} is a ${row.kind} message: feedback rates an answer, so send the id of an assistant message (role "assistant" in the messages API).`,
    );
  return row;
}
