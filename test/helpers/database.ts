import { randomUUID } from "node:crypto";
import { inject } from "vitest";
import pg from "pg";
import { createPool } from "../../src/platform/database.js";
import { migrate } from "../../src/history/migrate.js";

export type TestDatabase = { pool: pg.Pool; url: string; drop: () => Promise<void> };

/**
 * A fresh, migrated database of its own for one test file, on the server that global setup
 * chose (DATABASE_URL, or the embedded one). The server may hold anything earlier runs left.
 */
export async function createTestDatabase(serverUrl: string = inject("postgresServerUrl")): Promise<TestDatabase> {
  const name = `threadline_test_${randomUUID().replaceAll("-", "").slice(0, 16)}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = withDatabase(serverUrl, name);
  await migrate(url);
  const pool = createPool(url);
  return {
    pool,
    url,
    drop: async () => {
      await pool.end();
      const client = new pg.Client({ connectionString: serverUrl });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}

export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}
