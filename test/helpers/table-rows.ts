import type pg from "pg";

/**
 * Row counts of every table of the schema (whatever later migrations add), the migrations
 * table aside: "nothing was written" means these did not change.
 */
export async function tableRowCounts(db: pg.Pool): Promise<Record<string, number>> {
  const { rows: tables } = await db.query<{ name: string }>(
    "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name <> 'threadline_migrations' ORDER BY 1",
  );
  const counts: Record<string, number> = {};
  for (const { name } of tables) {
    const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${name}"`);
    counts[name] = rows[0]!.n;
  }
  return counts;
}
