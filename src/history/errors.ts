/**
 * Refusals that no retry can fix: the caller asked for something that is not theirs or does not
 * exist. Functions turn them into NonRetriableError, the HTTP API into 4xx answers.
 */
export class HistoryRefusal extends Error {
  constructor(
    readonly code: "thread_not_owned" | "thread_not_found" | "message_not_found" | "message_conflict" | "not_a_user_message" | "message_not_on_path" | "no_running_turn",
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
