import type pg from "pg";
import { transaction } from "./store.js";
import * as sql from "./users-sql.js";

/** What erasing a user removed: rows of each kind (the rows that cascade from threads are not counted apart). */
export type UserErasure = { threads: number; apiKeys: number; memories: number };

/** A memory component's "user deleted" hook: erases what it keeps about the user, returns how many rows. */
export type UserDeletedHook = (client: pg.PoolClient, userId: string) => Promise<number>;

/**
 * Erases everything Threadline keeps about a user, in one transaction: what each memory component
 * keeps, then every thread (with everything that cascades from it) and every API key. A run of the
 * user's still in flight then finds its thread gone and fails without writing.
 */
export async function eraseUser(db: pg.Pool, userId: string, hooks: readonly UserDeletedHook[]): Promise<UserErasure> {
  return transaction(db, async (client) => {
    let memories = 0;
    for (const hook of hooks) memories += await hook(client, userId);
    const threads = (await client.query(sql.deleteUserThreads, [userId])).rowCount ?? 0;
    const apiKeys = (await client.query(sql.deleteUserApiKeys, [userId])).rowCount ?? 0;
    return { threads, apiKeys, memories };
  });
}
