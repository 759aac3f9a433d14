import type pg from "pg";
import { MIGRATOR_TABLES } from "../../src/history/migrate.js";

/**
 * Row counts of every table of the schema (whatever later migrations add), the migrator's own
 * tables aside: "nothing was written" means these did not change.
 */
export async function tableRowCounts(db: pg.Pool): Promise<Record<string, number>> {
  const { rows: tables } = await db.query<{ name: string }>(
    "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND NOT (table_name = ANY($1)) ORDER BY 1",
    [MIGRATOR_TABLES],
  );
  const counts: Record<string, number> = {};
  for (const { name } of tables) {
    const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${name}"`);
    counts[name] = rows[0]!.n;
  }
  return counts;
}
