import { afterAll, beforeAll, beforeEach } from "vitest";
import { createTestDatabase, type TestDatabase } from "./database.js";
import { startModelServer, type ModelServer } from "./model-server.js";

export type TestBed = { db: TestDatabase; model: ModelServer };

/**
 * A test file's own database and scripted model server: created before its tests, the model's
 * script and recorded requests cleared before each test, both closed after the file.
 */
export function useTestBed(): TestBed {
  const bed = {} as TestBed;
  beforeAll(async () => {
    [bed.db, bed.model] = await Promise.all([createTestDatabase(), startModelServer()]);
  });
  afterAll(async () => {
    await bed.model?.close();
    await bed.db?.drop();
  });
  beforeEach(() => bed.model.reset());
  return bed;
}
