import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderSchema } from "../src/history/schema/snapshot.js";
import { createTestDatabase, type TestDatabase } from "./helpers/database.js";

/**
 * src/history/schema/schema.sql is the schema a migrated database has, so a change of schema shows
 * in review as a diff of that file: a migration or function source changed without regenerating it
 * fails here.
 */
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(() => db.drop());

describe("the schema snapshot", () => {
  it("src/history/schema/schema.sql is what the migrator makes of an empty database", async () => {
    const checkedIn = readFileSync("src/history/schema/schema.sql", "utf8");
    const migrated = await renderSchema(db.pool);
    expect(migrated, "the schema differs from schema.sql: run `npm run schema:snapshot`").toBe(checkedIn);
  });
});
