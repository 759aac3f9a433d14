/**
 * Refusals that no retry can fix: the caller asked for something that is not theirs or does not
 * exist. Functions turn them into NonRetriableError, the HTTP API into 4xx answers.
 * Imports nothing.
 */
export class HistoryRefusal extends Error {
  constructor(
    readonly code:
      | "thread_not_owned"
      | "thread_not_found"
      | "thread_deleted"
      | "message_not_found"
      | "message_conflict"
      | "not_a_user_message"
      | "not_an_answer"
      | "message_not_on_path"
      | "no_running_turn"
      | "thread_busy",
    message: string,
  ) {
    super(message);
    this.name = "HistoryRefusal";
  }
}

export const threadNotOwned = (threadId: string) =>
  new HistoryRefusal(
    "thread_not_owned",
    `Thread ${threadId} belongs to another user: send the message with that thread's owner as userId, or omit threadId to start a new thread.`,
  );

/** What threadline_thread_not_deleted raises when a statement would create a thread under a tombstoned id. */
const THREAD_DELETED_SQLSTATE = "TL410";

/** Whether a database error is the tombstone's refusal to re-create a deleted thread. */
export const isThreadDeletedError = (error: unknown): boolean =>
  typeof error === "object" && error !== null && (error as { code?: unknown }).code === THREAD_DELETED_SQLSTATE;

/** A deleted thread's id, used again before its tombstone was pruned (docs/data-lifecycle.md). */
export const threadDeleted = (threadId: string) =>
  new HistoryRefusal(
    "thread_deleted",
    `Thread ${threadId} was deleted, and a deleted thread's id cannot be used again for a while (THREAD_TOMBSTONE_DAYS): start a new thread with a new id.`,
  );
