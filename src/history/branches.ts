import type pg from "pg";
import * as sql from "./branches-sql.js";
import { ThreadBusy } from "./busy.js";
import { HistoryRefusal, threadNotOwned } from "./errors.js";
import { transaction } from "./transaction.js";

/**
 * The conversation tree (migration 0019): editing a user message makes a sibling branch (stored by
 * the edit's turn, threadline_begin_turn), switching makes another branch the thread's current
 * path, and a branch off the path can be deleted. While a turn runs on the thread the path is
 * its: a switch, an edit or a deletion is refused (409 naming the running turn).
 * Imports: pg, errors.ts, store.ts and branches-sql.ts.
 */

const threadNotFound = (threadId: string) =>
  new HistoryRefusal("thread_not_found", `Thread ${threadId} does not exist.`);

/** A turn runs on the thread: the path is not changed under it (409 naming the turn, as busy.ts's). */
const threadBusy = (threadId: string, runId: string | null, messageId: string | null) =>
  new ThreadBusy(threadId, { runId: runId!, messageId: messageId! }, "edit the message or switch the branch");

const messageNotFound = (threadId: string, messageId: string) =>
  new HistoryRefusal("message_not_found", `Message ${messageId} is not a message of thread ${threadId}.`);

/**
 * Makes the branch through a message (a user message, or an answer variant) the thread's current
 * path; returns how many messages joined or left it (0: it was current already).
 */
export async function switchBranch(
  db: pg.Pool,
  input: { threadId: string; userId: string; messageId: string },
): Promise<{ changed: number }> {
  const { threadId, messageId } = input;
  const { rows } = await db.query<sql.SwitchBranchRow>(sql.switchBranch, [threadId, input.userId, messageId]);
  const row = rows[0]!;
  switch (row.refusal) {
    case null:
      return { changed: row.changed! };
    case "thread_not_found":
      throw threadNotFound(threadId);
    case "thread_not_owned":
      throw threadNotOwned(threadId);
    case "message_not_found":
      throw messageNotFound(threadId, messageId);
    case "thread_busy":
      throw threadBusy(threadId, row.running_run_id, row.running_message_id);
    default:
      throw new Error(`Unknown storage refusal ${row.refusal}`);
  }
}

/**
 * Before an edit's event is sent (one read): the edited message is a user message on the current
 * path of the caller's thread, no turn runs there, and the new message id is unused, or names this
 * very edit already stored (same thread, same place, same words: the event is sent again and the
 * run stores nothing new). Anything else is the refusal the run itself would end with. Returns the
 * run that last refused this edit (a turn began after this check), if one did.
 */
export async function checkEditable(
  db: pg.Pool,
  input: { threadId: string; userId: string; editedId: string; messageId: string; content: string },
): Promise<{ refusedRunId: string | null }> {
  const { threadId, editedId, messageId } = input;
  const { rows } = await db.query<sql.SelectEditableRow>(sql.selectEditable, [threadId, editedId, messageId]);
  const found = rows[0];
  if (!found) throw threadNotFound(threadId);
  if (found.owner !== input.userId) throw threadNotOwned(threadId);
  if (found.message_thread_id !== null) {
    const sameEdit =
      found.message_thread_id === threadId &&
      found.message_kind === "user" &&
      found.message_text === input.content &&
      found.message_parent_id === found.edited_parent_id;
    if (!sameEdit)
      throw new HistoryRefusal(
        "message_conflict",
        `Message id ${messageId} is already used by another message: generate a new messageId for the edited message.`,
      );
    return { refusedRunId: found.refused_run_id };
  }
  if (found.edited_kind === null) throw messageNotFound(threadId, editedId);
  if (found.edited_kind !== "user")
    throw new HistoryRefusal(
      "not_a_user_message",
      `Message ${editedId} is an answer: only a user message can be edited (regenerate an answer instead).`,
    );
  if (!found.edited_on_path)
    throw new HistoryRefusal(
      "message_not_on_path",
      `Message ${editedId} is not on the thread's current path: switch to its branch first (PUT …/messages/${editedId}/current).`,
    );
  if (found.running_run_id !== null) throw threadBusy(threadId, found.running_run_id, found.running_message_id);
  return { refusedRunId: found.refused_run_id };
}

/**
 * Deletes a branch off the current path (a user message or an answer variant, with everything
 * that follows it, the approvals of its tool calls and its runs' event log too); its user
 * messages leave tombstones, so no event of theirs stores them again. Returns how many messages were deleted directly (their
 * followers cascade).
 */
export async function deleteBranch(
  db: pg.Pool,
  input: { threadId: string; userId: string; messageId: string },
): Promise<{ deleted: number }> {
  const { threadId, messageId } = input;
  return transaction(db, async (client) => {
    const locked = await client.query<sql.LockThreadForBranchChangeRow>(sql.lockThreadForBranchChange, [threadId]);
    const thread = locked.rows[0];
    if (!thread) throw threadNotFound(threadId);
    if (thread.owner !== input.userId) throw threadNotOwned(threadId);
    const place = (await client.query<sql.SelectMessagePlaceRow>(sql.selectMessagePlace, [threadId, messageId]))
      .rows[0]!;
    if (place.running_run_id !== null) throw threadBusy(threadId, place.running_run_id, place.running_message_id);
    if (place.on_path === null) throw messageNotFound(threadId, messageId);
    if (place.on_path)
      throw new HistoryRefusal(
        "branch_on_path",
        `Message ${messageId} is on the thread's current path: switch to another branch first, then delete this one.`,
      );
    await client.query(sql.recordBranchTombstones, [threadId, messageId]);
    await client.query(sql.deleteBranchEvents, [threadId, messageId]);
    const deleted = await client.query(sql.deleteBranch, [threadId, messageId]);
    await client.query(sql.deleteBranchApprovals, [threadId]);
    return { deleted: deleted.rowCount ?? 0 };
  });
}

/**
 * The message on the current path in the place of a user message: itself, or the edit that
 * replaced it (useChat keeps the edited message's id for its edit); the message itself when none.
 */
export async function currentSibling(db: pg.Pool, threadId: string, messageId: string): Promise<string> {
  const { rows } = await db.query<sql.SelectCurrentSiblingRow>(sql.selectCurrentSibling, [threadId, messageId]);
  return rows[0]?.id ?? messageId;
}
