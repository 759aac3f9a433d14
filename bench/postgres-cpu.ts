import { readFile } from "node:fs/promises";
import type pg from "pg";

/*
 * PostgreSQL's share of a run's CPU, when the server is local: the on-CPU time of this database's
 * backends, read from /proc/<pid>/schedstat before and after (bench:turn, bench:throughput).
 */

/** The server processes of this database's connections (empty when PostgreSQL runs elsewhere). */
export async function backendPids(pool: pg.Pool): Promise<number[]> {
  const { rows } = await pool.query("SELECT pid FROM pg_stat_activity WHERE datname = current_database()");
  return rows.map((r) => r.pid as number);
}

/** Nanoseconds each of these backends has spent on a CPU, for those whose /proc entry is readable. */
export async function backendCpuNs(pids: number[]): Promise<Map<number, number>> {
  const cpu = new Map<number, number>();
  for (const pid of pids) {
    try {
      cpu.set(pid, Number((await readFile(`/proc/${pid}/schedstat`, "utf8")).split(" ")[0]));
    } catch {
      // Not local, or the connection closed meanwhile (the pool ends idle ones).
    }
  }
  return cpu;
}

/**
 * Milliseconds of backend CPU between two readings: a backend read both times counts its
 * difference, one that started in between all of its time (a closed one is missed); undefined
 * when none could be read.
 */
export function backendCpuDelta(before: Map<number, number>, after: Map<number, number>): number | undefined {
  if (after.size === 0) return undefined;
  let ns = 0;
  for (const [pid, end] of after) ns += end - (before.get(pid) ?? 0);
  return ns / 1e6;
}
