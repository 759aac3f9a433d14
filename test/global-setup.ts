import path from "node:path";
import type { TestProject } from "vitest/node";
import { startEmbeddedPostgres, type EmbeddedServer } from "../src/history/database.js";
import { withDatabase } from "./helpers/database.js";

declare module "vitest" {
  export interface ProvidedContext {
    postgresServerUrl: string;
  }
}

let embedded: EmbeddedServer | undefined;

/** DATABASE_URL when set; otherwise one embedded PostgreSQL for the whole run. */
export async function setup(project: TestProject) {
  const fromEnv = process.env.DATABASE_URL?.trim();
  if (fromEnv) {
    project.provide("postgresServerUrl", withDatabase(fromEnv, "postgres"));
    return;
  }
  embedded = await startEmbeddedPostgres(path.resolve(".data", "test-postgres"), Number(process.env.TEST_EMBEDDED_POSTGRES_PORT ?? 54339));
  project.provide("postgresServerUrl", embedded.urlFor("postgres"));
}

export async function teardown() {
  await embedded?.stop();
}
