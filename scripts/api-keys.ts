// First: the settings of .env, before any module reads the environment.
import "../src/platform/env-file.js";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import type pg from "pg";
import { createApiKey } from "../src/auth/api-keys.js";
import { verifiedUserId } from "../src/auth/identity.js";
import { listApiKeys, revokeApiKey, type ApiKeyRecord } from "../src/auth/api-key-store.js";
import { runDatabaseCommand, UsageError } from "./database-command.js";

const USAGE = `Usage: node dist/scripts/api-keys.js <command>   (npm run api-keys -- <command>)
  create --user <user id> --name <what the key is for>   prints the key once
  list [--user <user id>]
  revoke <key id>
Uses DATABASE_URL, or the embedded database under DATA_DIR; applies pending migrations first.`;

/** A refusal of the command line itself: printed with the usage. */

const describe = (key: ApiKeyRecord) =>
  `${key.id}  user=${key.userId}  name=${JSON.stringify(key.name)}  created=${key.createdAt.toISOString()}${key.revokedAt ? `  REVOKED ${key.revokedAt.toISOString()}` : ""}`;

/**
 * npm run api-keys — creates, lists and revokes server-to-server API keys (DATABASE_URL, or the
 * embedded database). Returns what to print.
 */
export async function apiKeysCommand(args: string[], db: pg.Pool): Promise<string> {
  const { positionals, values } = parseArgs({
    args,
    allowPositionals: true,
    options: { user: { type: "string" }, name: { type: "string" } },
  });
  const [command, ...rest] = positionals;
  if (command === "create") {
    const userId = verifiedUserId.safeParse(values.user);
    if (!userId.success)
      throw new UsageError("create needs --user <user id> (1 to 200 characters, no control characters)");
    if (!values.name?.trim()) throw new UsageError("create needs --name <what the key is for>");
    const { key, record } = await createApiKey(db, { userId: userId.data, name: values.name.trim() });
    return `${describe(record)}\n\nAPI key (shown once, store it now; send it as "Authorization: Bearer <key>"):\n${key}`;
  }
  if (command === "list") {
    const keys = await listApiKeys(db, values.user);
    return keys.length === 0 ? "No API keys." : keys.map(describe).join("\n");
  }
  if (command === "revoke") {
    if (rest.length !== 1) throw new UsageError("revoke needs exactly one key id (see list)");
    const revoked = await revokeApiKey(db, rest[0]!);
    if (!revoked) throw new UsageError(`No API key has the id ${rest[0]}`);
    return `Revoked: ${describe(revoked)}`;
  }
  throw new UsageError(command === undefined ? "no command given" : `unknown command ${command}`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) await runDatabaseCommand(USAGE, apiKeysCommand);
