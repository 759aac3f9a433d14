// First: the settings of .env, before any module reads the environment.
import "../src/platform/env-file.js";
import { createReadStream } from "node:fs";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import type pg from "pg";
import { importUserData } from "../src/history/import.js";
import { runDatabaseCommand, UsageError } from "./database-command.js";

const USAGE = `Usage: node dist/scripts/import.js <export.jsonl>   (npm run import -- <export.jsonl>)
  restores a user's export (GET /api/export) into this database, all of it or nothing
Uses DATABASE_URL, or the embedded database under DATA_DIR; applies pending migrations first.`;

/**
 * npm run import — restores one user's subject-access export into the app's database
 * (DATABASE_URL, or the embedded one), all of it or nothing. Returns what to print.
 */
export async function importCommand(args: string[], db: pg.Pool): Promise<string> {
  if (args.length !== 1) throw new UsageError("needs the path of one export file");
  const lines = createInterface({ input: createReadStream(args[0]!, "utf8"), crlfDelay: Infinity });
  const restored = await importUserData(db, lines);
  return `Restored user ${JSON.stringify(restored.userId)}: ${restored.threads} threads, ${restored.messages} messages, ${restored.turns} turns, ${restored.summaries} summaries, ${restored.agentStates} agent states, ${restored.events} events, ${restored.memories} memories (API keys are not restored: issue new ones).`;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) await runDatabaseCommand(USAGE, importCommand);
