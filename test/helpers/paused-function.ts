import { expect } from "vitest";
import type pg from "pg";
import { createPool } from "../../src/platform/database.js";
import { createTestDatabase, type TestDatabase } from "./database.js";

/** The advisory lock a paused function waits on (one bigint key: objid 4242, objsubid 1 in pg_locks). */
const PAUSE_KEY = 4242;
const PATIENCE_MS = 10_000;

/** Locks not granted to this database's sessions: the pause's (`pause`), or any other (`other`). */
const WAITING = `
  SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
  WHERE a.datname = current_database() AND NOT l.granted
    AND (l.locktype = 'advisory' AND l.objsubid = 1 AND l.objid = ${PAUSE_KEY}) = ($1 = 'pause')`;

export type PausedDatabase = TestDatabase & {
  /** Two pools of their own, one connection each in use at a time: the paused caller's and the other's. */
  pools: [pg.Pool, pg.Pool];
  /** Resolves once a caller waits at the pause. */
  reachedPause: () => Promise<void>;
  /** Resolves once `work` has finished, or waits for a lock other than the pause (one the paused caller holds). */
  settled: (work: Promise<unknown>) => Promise<void>;
  /** Lets the paused caller go on. */
  release: () => Promise<void>;
};

/**
 * A read-committed race made deterministic: runs `test` on a database of its own whose function
 * `name` pauses where `at` is found (`where`: before or after it) while the PL/pgSQL condition
 * `when` holds (e.g. `p_run_id LIKE 'paused-%'`), on an advisory lock held until `release()`.
 * Only the pause is added to the function (pg_get_functiondef, edited, created again), so a test
 * can stop one caller between two of its statements while another commits.
 */
export async function withPausedFunction(
  { name, at, where = "before", when }: { name: string; at: string; where?: "before" | "after"; when: string },
  test: (db: PausedDatabase) => Promise<void>,
): Promise<void> {
  const db = await createTestDatabase();
  const pools: [pg.Pool, pg.Pool] = [createPool(db.url), createPool(db.url)];
  const holder = await db.pool.connect();
  try {
    const { rows } = await db.pool.query<{ def: string }>("SELECT pg_get_functiondef($1::regproc) AS def", [name]);
    const def = rows[0]!.def;
    expect(def).toContain(at);
    const pause = `\nIF ${when} THEN PERFORM pg_advisory_xact_lock(${PAUSE_KEY}); END IF;\n`;
    await db.pool.query(def.replace(at, where === "before" ? `${pause}${at}` : `${at}${pause}`));
    await holder.query("BEGIN");
    await holder.query("SELECT pg_advisory_xact_lock($1)", [PAUSE_KEY]);
    const waiting = async (on: "pause" | "other") => (await db.pool.query<{ n: number }>(WAITING, [on])).rows[0]!.n;
    await test({
      ...db,
      pools,
      reachedPause: () => expect.poll(() => waiting("pause"), { timeout: PATIENCE_MS }).toBe(1),
      settled: async (work) => {
        let done = false;
        void work.then(
          () => (done = true),
          () => (done = true),
        );
        await expect.poll(async () => done || (await waiting("other")) > 0, { timeout: PATIENCE_MS }).toBe(true);
      },
      release: async () => {
        await holder.query("COMMIT");
      },
    });
  } finally {
    await holder.query("ROLLBACK");
    holder.release();
    await Promise.all(pools.map((pool) => pool.end()));
    await db.drop();
  }
}
