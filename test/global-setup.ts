import { chmod, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { startEmbeddedPostgres, type EmbeddedServer } from "../src/platform/database.js";
import { withDatabase } from "./helpers/database.js";

declare module "vitest" {
  export interface ProvidedContext {
    postgresServerUrl: string;
  }
}

let embedded: { server: EmbeddedServer; dir: string } | undefined;

/**
 * DATABASE_URL when set; otherwise one embedded PostgreSQL for the whole run, on a free port and a
 * data directory of its own, so two runs on one machine never meet.
 */
export async function setup(project: TestProject) {
  const fromEnv = process.env.DATABASE_URL?.trim();
  if (fromEnv) {
    project.provide("postgresServerUrl", withDatabase(fromEnv, "postgres"));
    return;
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), "threadline-test-"));
  // As root the server runs as the postgres OS user: let it through to its data, without listing.
  await chmod(dir, 0o711);
  embedded = { server: await startEmbeddedPostgres(path.join(dir, "postgres"), "free"), dir };
  project.provide("postgresServerUrl", embedded.server.urlFor("postgres"));
}

export async function teardown() {
  if (!embedded) return;
  await embedded.server.stop();
  await rm(embedded.dir, { recursive: true, force: true });
}
