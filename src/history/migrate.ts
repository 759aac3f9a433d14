import { fileURLToPath } from "node:url";
import { runner } from "node-pg-migrate";

const MIGRATIONS_DIR = fileURLToPath(new URL("./migrations", import.meta.url));

/**
 * Brings the schema up to date: the ordered SQL files in ./migrations, applied once each under
 * node-pg-migrate's advisory lock, so several app instances starting together do not race.
 */
export async function migrate(
  databaseUrl: string,
  log: (message: string) => void = () => undefined,
): Promise<string[]> {
  const applied = await runner({
    databaseUrl,
    dir: MIGRATIONS_DIR,
    direction: "up",
    migrationsTable: "threadline_migrations",
    advisoryLockMode: "wait",
    log,
    logger: { debug: () => undefined, info: log, warn: log, error: log },
  });
  return applied.map((migration) => migration.name);
}
