import { randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import path from "node:path";
import type pg from "pg";
import { createPool, freePort, startEmbeddedPostgres, type EmbeddedServer } from "../../src/platform/database.js";
import { migrate } from "../../src/history/migrate.js";

export type OwnDatabase = { server: EmbeddedServer; pool: pg.Pool; close: () => Promise<void> };

/**
 * An embedded PostgreSQL server of a test file's own, migrated, with a pool: a test that stops the
 * database in the middle of a turn must not stop the server the other files share.
 */
export async function startOwnDatabase(label: string): Promise<OwnDatabase> {
  // Under .data, not a private temp dir: as root the server runs as its own OS user, which must reach it.
  const dataDir = path.resolve(".data", `${label}-${randomUUID()}`);
  const server = await startEmbeddedPostgres(path.join(dataDir, "pg"), await freePort());
  await server.createDatabaseIfMissing("threadline");
  await migrate(server.urlFor("threadline"));
  const pool = createPool(server.urlFor("threadline"));
  return {
    server,
    pool,
    close: async () => {
      await pool.end();
      await server.stop();
      // As root in a directory the postgres OS user cannot enter, the data lives elsewhere (server.dataDir).
      await rm(server.dataDir, { recursive: true, force: true });
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
