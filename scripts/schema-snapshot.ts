// First: the settings of .env, before any module reads the environment.
import "../src/platform/env-file.js";
import { randomUUID } from "node:crypto";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { startEmbeddedPostgres } from "../src/platform/database.js";
import { migrate } from "../src/history/migrate.js";
import { renderSchema } from "../src/history/schema/snapshot.js";

/**
 * npm run schema:snapshot — migrates a scratch database of its own and writes its schema to
 * src/history/schema/schema.sql. The server: DATABASE_URL's (the app's database is not touched), or
 * a temporary embedded one.
 */
const SNAPSHOT = fileURLToPath(new URL("../src/history/schema/schema.sql", import.meta.url));

async function withServer<T>(use: (serverUrl: string) => Promise<T>): Promise<T> {
  const fromEnv = process.env.DATABASE_URL?.trim();
  if (fromEnv) return use(fromEnv);
  const dir = await mkdtemp(path.join(os.tmpdir(), "threadline-schema-"));
  // As root the server runs as the postgres OS user: let it through to its data, without listing.
  await chmod(dir, 0o711);
  try {
    const server = await startEmbeddedPostgres(path.join(dir, "postgres"), "free");
    try {
      return await use(server.urlFor("postgres"));
    } finally {
      await server.stop();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const schema = await withServer(async (serverUrl) => {
  const name = `threadline_schema_${randomUUID().replaceAll("-", "").slice(0, 16)}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
    const url = new URL(serverUrl);
    url.pathname = `/${name}`;
    try {
      await migrate(url.toString());
      const client = new pg.Client({ connectionString: url.toString() });
      await client.connect();
      try {
        return await renderSchema(client);
      } finally {
        await client.end();
      }
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    }
  } finally {
    await admin.end();
  }
});
await writeFile(SNAPSHOT, schema);
console.info(`Wrote ${path.relative(process.cwd(), SNAPSHOT)}.`);
