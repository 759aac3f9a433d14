import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import type pg from "pg";
import { createApiKey } from "../src/auth/api-keys.js";
import { verifiedUserId } from "../src/auth/identity.js";
import { readEnvironment } from "../src/config.js";
import { listApiKeys, revokeApiKey, type ApiKeyRecord } from "../src/history/api-keys.js";
import { openDatabase } from "../src/history/database.js";
import { migrate } from "../src/history/migrate.js";

const USAGE = `Usage:
  npm run api-keys -- create --user <user id> --name <what the key is for>   prints the key once
  npm run api-keys -- list [--user <user id>]
  npm run api-keys -- revoke <key id>`;

/** A refusal of the command line itself: printed with the usage. */
class UsageError extends Error {}

const describe = (key: ApiKeyRecord) =>
  `${key.id}  user=${key.userId}  name=${JSON.stringify(key.name)}  created=${key.createdAt.toISOString()}${key.revokedAt ? `  REVOKED ${key.revokedAt.toISOString()}` : ""}`;

/**
 * npm run api-keys — creates, lists and revokes server-to-server API keys (DATABASE_URL, or the
 * embedded database). Returns what to print.
 */
export async function apiKeysCommand(args: string[], db: pg.Pool): Promise<string> {
  const { positionals, values } = parseArgs({ args, allowPositionals: true, options: { user: { type: "string" }, name: { type: "string" } } });
  const [command, ...rest] = positionals;
  if (command === "create") {
    const userId = verifiedUserId.safeParse(values.user);
    if (!userId.success) throw new UsageError("create needs --user <user id> (1 to 200 characters, no control characters)");
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

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const env = readEnvironment();
  const database = await openDatabase({ databaseUrl: env.DATABASE_URL, dataDir: env.DATA_DIR, embeddedPort: env.EMBEDDED_POSTGRES_PORT });
  let exitCode = 0;
  try {
    await migrate(database.url);
    console.info(await apiKeysCommand(process.argv.slice(2), database.pool));
  } catch (error) {
    console.error(error instanceof UsageError ? `${error.message}\n\n${USAGE}` : (error as Error).message);
    exitCode = 1;
  } finally {
    await database.close();
  }
  // Exit explicitly: a library loaded on the way resets process.exitCode.
  process.exit(exitCode);
}
