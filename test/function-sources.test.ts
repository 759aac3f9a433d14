import { randomUUID } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { runner } from "node-pg-migrate";
import pg from "pg";
import { afterAll, describe, expect, inject, it } from "vitest";
import { migrate } from "../src/history/migrate.js";
import { renderSchema } from "../src/history/schema/snapshot.js";
import { withDatabase } from "./helpers/database.js";

/**
 * The migrator's function sources (src/history/schema/functions, re-applied when they change, under
 * the migration lock). test/fixtures/migrations-before-function-sources holds the migrations as
 * they were before: function bodies in migrations, Down sections included (node-pg-migrate runs
 * only the Up part). A database they migrated, fully or part of the way, must end identical to one
 * the current migrator makes from scratch.
 */
const OLD_MIGRATIONS = "test/fixtures/migrations-before-function-sources";
const SNAPSHOT = readFileSync("src/history/schema/schema.sql", "utf8");
/** Migrations added after the switch: the old way never ran them, so the migrator applies them. */
const LATER_MIGRATIONS = readdirSync("src/history/migrations")
  .filter((file) => file.endsWith(".sql") && !readdirSync(OLD_MIGRATIONS).includes(file))
  .map((file) => file.slice(0, -".sql".length))
  .sort();
const FUNCTIONS = readdirSync("src/history/schema/functions")
  .filter((file) => file.endsWith(".sql"))
  .map((file) => file.slice(0, -".sql".length))
  .sort();

const serverUrl = inject("postgresServerUrl");
const created: string[] = [];

/** An empty database of this file's own: its URL. */
async function emptyDatabase(): Promise<string> {
  const name = `threadline_test_${randomUUID().replaceAll("-", "").slice(0, 16)}`;
  await withClient(serverUrl, (client) => client.query(`CREATE DATABASE ${name}`));
  created.push(name);
  return withDatabase(serverUrl, name);
}

async function withClient<T>(url: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

/** The first `count` of the old migrations, as the migrator before function sources ran them. */
async function migrateTheOldWay(url: string, count: number): Promise<void> {
  await runner({
    databaseUrl: url,
    dir: OLD_MIGRATIONS,
    direction: "up",
    count,
    migrationsTable: "threadline_migrations",
    log: () => undefined,
  });
}

/** pg_get_functiondef of every function of the schema that no extension owns, by name. */
async function functionDefinitions(url: string): Promise<Record<string, string>> {
  const { rows } = await withClient(url, (client) =>
    client.query<{ name: string; definition: string }>(
      `SELECT p.proname AS name, pg_get_functiondef(p.oid) AS definition FROM pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')`,
    ),
  );
  return Object.fromEntries(rows.map((row) => [row.name, row.definition]));
}

/** Each function's pg_proc row version: CREATE OR REPLACE writes a new one, even with the same body. */
async function functionVersions(url: string): Promise<Record<string, string>> {
  const { rows } = await withClient(url, (client) =>
    client.query<{ name: string; version: string }>(
      `SELECT p.proname AS name, p.xmin::text AS version FROM pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace AND p.proname = ANY($1)`,
      [FUNCTIONS],
    ),
  );
  return Object.fromEntries(rows.map((row) => [row.name, row.version]));
}

const schemaOf = (url: string) => withClient(url, (client) => renderSchema(client));

afterAll(async () => {
  await withClient(serverUrl, async (client) => {
    for (const name of created) await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  });
});

describe("function sources", () => {
  it("every function of the schema has its source file, and every file its function", async () => {
    const url = await emptyDatabase();
    await migrate(url);
    expect(Object.keys(await functionDefinitions(url)).sort()).toEqual(FUNCTIONS);
  });

  it("a database migrated the old way all along ends identical to one migrated from scratch, every file applied once", async () => {
    const url = await emptyDatabase();
    await migrateTheOldWay(url, readdirSync(OLD_MIGRATIONS).length);
    // No function was recorded as applied yet, nor any later migration. (Until a file changed after
    // the switch, the old way alone already gave the snapshot's schema: the switch's commit left
    // schema.sql as it was.)
    expect(await migrate(url)).toEqual([...LATER_MIGRATIONS, ...FUNCTIONS.map((name) => `functions/${name}.sql`)]);
    expect(await schemaOf(url)).toBe(SNAPSHOT);
    expect(await migrate(url)).toEqual([]);
  });

  // Part of the way: before any function (0005), before the answer ends the stream (0010), before
  // the stop (0011), and before the run's log writer changed its signature (0012).
  it.each([5, 10, 11, 12])(
    "a database the old migrations took through their first %i ends identical to one migrated from scratch",
    async (count) => {
      const url = await emptyDatabase();
      await migrateTheOldWay(url, count);
      await migrate(url);
      expect(await schemaOf(url)).toBe(SNAPSHOT);
    },
  );

  it("migrating an up-to-date database applies nothing: no function is created again", async () => {
    const url = await emptyDatabase();
    expect(await migrate(url)).toEqual(expect.arrayContaining(FUNCTIONS.map((name) => `functions/${name}.sql`)));
    const versions = await functionVersions(url);
    expect(await migrate(url)).toEqual([]);
    expect(await functionVersions(url)).toEqual(versions);
  });

  it("a function whose file changed since it was applied is applied again, once; a missing one is created", async () => {
    const url = await emptyDatabase();
    await migrate(url);
    const current = await functionDefinitions(url);
    // The database as an older file left it: another body, recorded under another checksum.
    await withClient(url, async (client) => {
      await client.query(
        `CREATE OR REPLACE FUNCTION threadline_message_owner() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$`,
      );
      await client.query(
        `UPDATE threadline_function_sources SET checksum = 'an older file' WHERE name = 'threadline_message_owner'`,
      );
      await client.query("DROP FUNCTION threadline_turn_retrying(text, text, jsonb)");
    });
    expect(await migrate(url)).toEqual([
      "functions/threadline_message_owner.sql",
      "functions/threadline_turn_retrying.sql",
    ]);
    expect(await functionDefinitions(url)).toEqual(current);
    expect(await migrate(url)).toEqual([]);
  });

  it("an older version started on a database a newer one migrated leaves its functions as they are", async () => {
    const url = await emptyDatabase();
    await migrate(url);
    // The newer version's function, as this version's file does not have it (recorded under another checksum).
    const newer = `CREATE OR REPLACE FUNCTION threadline_message_owner() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$`;
    await withClient(url, async (client) => {
      await client.query(newer);
      await client.query(
        `UPDATE threadline_function_sources SET checksum = 'a newer file' WHERE name = 'threadline_message_owner'`,
      );
      await client.query("INSERT INTO threadline_migrations (name, run_on) VALUES ('9999_a_newer_version', now())");
    });
    const left = await functionDefinitions(url);
    const log: string[] = [];
    expect(await migrate(url, (line) => log.push(line))).toEqual([]);
    expect(await functionDefinitions(url)).toEqual(left);
    expect(log.join("\n")).toContain("9999_a_newer_version");
    // Without the newer migration (this version's database), the file is applied again.
    await withClient(url, (client) =>
      client.query("DELETE FROM threadline_migrations WHERE name = '9999_a_newer_version'"),
    );
    expect(await migrate(url)).toEqual(["functions/threadline_message_owner.sql"]);
  });

  it("migrators started together all succeed, and each migration and function is applied by one of them", async () => {
    const url = await emptyDatabase();
    const results = await Promise.all([migrate(url), migrate(url), migrate(url)]);
    const applied = results.flat();
    expect(applied.length).toBe(new Set(applied).size);
    expect(applied.filter((name) => name.startsWith("functions/")).sort()).toEqual(
      FUNCTIONS.map((name) => `functions/${name}.sql`),
    );
    expect(applied.filter((name) => !name.startsWith("functions/")).length).toBe(
      readdirSync("src/history/migrations").length,
    );
    expect(await schemaOf(url)).toBe(SNAPSHOT);
  });
});
