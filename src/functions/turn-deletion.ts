import { threadDeleted, userDeleted } from "../../inngest.config.js";

/**
 * The turn functions' cancelOn for deletion, beside the stop's: a deleted thread's running and
 * queued runs are cancelled (thread/deleted, sent by the delete route, retention and a user's
 * erasure), and so is every run of an erased user (user/deleted). A chat event names its thread by
 * threadId, or, for a new thread, by its first message's id (the thread takes that id): one entry
 * each, so no expression reads a field the event may lack. Matching on the user too keeps one
 * user's deletion from touching a run that names the same id for another user (which its first
 * step refuses anyway). A run cancelled between steps makes no further model call; one that is
 * queued never starts. Whatever slips past (an event re-delivered or replayed later) is refused by
 * the thread's tombstone in the turn's first statement (migration 0016).
 */
export const cancelOnDeletion = [
  { event: threadDeleted, if: "async.data.threadId == event.data.threadId && async.data.userId == event.data.userId" },
  { event: threadDeleted, if: "async.data.threadId == event.data.messageId && async.data.userId == event.data.userId" },
  { event: userDeleted, if: "async.data.userId == event.data.userId" },
];
