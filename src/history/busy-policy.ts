import { z } from "zod";

/**
 * What a chat message sent while a turn of its thread is unfinished does (src/history/busy.ts):
 * - enqueue: its turn waits for the earlier ones (src/history/turn-waits.ts);
 * - reject: refused (HTTP 409 naming the unfinished turn), nothing stored;
 * - interrupt: the unfinished turns ahead are stopped, keeping what they streamed, then it is answered;
 * - rollback: as interrupt, and their user messages and partial answers leave the current path,
 *   so the model never sees them.
 * Imports: zod only (inngest.config.ts reads it).
 */
export const busyPolicy = z.enum(["enqueue", "reject", "interrupt", "rollback"], {
  error: 'busy must be "enqueue", "reject", "interrupt" or "rollback"',
});
export type BusyPolicy = z.infer<typeof busyPolicy>;

/** Without a request's policy or the operator's BUSY_POLICY: today's behaviour, the message waits its turn. */
export const DEFAULT_BUSY_POLICY: BusyPolicy = "enqueue";
