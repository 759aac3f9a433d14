/**
 * Erasing a user: threads (and everything keyed by them), API keys, the usage ledger and budget,
 * and what memory components keep, in one transaction. Imports: pg, store.ts (transaction),
 * usage.ts, users-sql.ts.
 */
import type pg from "pg";
import { transaction } from "./transaction.js";
import { deleteUserUsage } from "./usage.js";
import * as sql from "./users-sql.js";

/**
 * What erasing a user removed: rows of each kind (the rows that cascade from threads are not
 * counted apart), and the deleted threads' ids, to announce (thread/deleted).
 */
export type UserErasure = {
  threads: number;
  apiKeys: number;
  memories: number;
  usageRecords: number;
  threadIds: string[];
};

/** A memory component's "user deleted" hook: erases what it keeps about the user, returns how many rows. */
export type UserDeletedHook = (client: pg.PoolClient, userId: string) => Promise<number>;

/**
 * Erases everything Threadline keeps about a user, in one transaction: what each memory component
 * keeps, then every thread (with everything that cascades from it) and every API key. Each thread
 * leaves a tombstone (migration 0016), so no event of the user's can create it again; the caller
 * announces the deletions, which cancels the user's runs (see scripts/delete-user.ts). The erasure
 * is recorded too (user_erasures, a digest of the user id and its time): a chat message sent
 * before it whose run begins later is not stored, while one sent after it is answered.
 */
export async function eraseUser(db: pg.Pool, userId: string, hooks: readonly UserDeletedHook[]): Promise<UserErasure> {
  return transaction(db, async (client) => {
    // Before any read: a thread a turn is creating is committed first, or waits for the erasure.
    await client.query(sql.lockUserErasure, [userId]);
    let memories = 0;
    for (const hook of hooks) memories += await hook(client, userId);
    const threadIds = (await client.query<sql.DeleteUserThreadsRow>(sql.deleteUserThreads, [userId])).rows.map(
      (row) => row.id,
    );
    const apiKeys = (await client.query(sql.deleteUserApiKeys, [userId])).rowCount ?? 0;
    // The usage ledger outlives a thread's deletion (what was spent stays spent), not the user's erasure.
    const usageRecords = await deleteUserUsage(client, userId);
    await client.query(sql.recordUserErasure, [userId]);
    return { threads: threadIds.length, apiKeys, memories, usageRecords, threadIds };
  });
}
