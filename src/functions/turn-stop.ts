import { turnStopRequested } from "../../inngest.config.js";

/**
 * The turn functions' cancelOn: a stop of the turn answering the same user message (both trigger
 * events carry messageId) cancels the run, so no further model call or step runs for a turn that
 * is already recorded as stopped. A step executing when the cancellation lands still runs to its
 * end; its late answer is dropped by threadline_store_answer (migration 0012). The run's
 * inngest/function.cancelled finds the turn no longer running and records nothing more.
 */
export const cancelOnStop = [{ event: turnStopRequested, if: "async.data.messageId == event.data.messageId" }];
