// First: the settings of .env, before any module reads the environment.
import "../src/platform/env-file.js";
import { readEnvironment } from "../src/config.js";
import { openDatabase } from "../src/platform/database.js";
import { migrate } from "../src/history/migrate.js";
import { exitOnHelp } from "./database-command.js";

/** npm run db:migrate — applies pending migrations to DATABASE_URL, or to the embedded database. */
exitOnHelp(
  `Usage: node dist/scripts/migrate.js   (npm run db:migrate)
  applies pending migrations to DATABASE_URL, or to the embedded database under DATA_DIR (the app also does at every start)`,
  process.argv.slice(2),
);
const env = readEnvironment();
const database = await openDatabase({
  databaseUrl: env.DATABASE_URL,
  dataDir: env.DATA_DIR,
  embeddedPort: env.EMBEDDED_POSTGRES_PORT,
});
try {
  const applied = await migrate(database.url);
  console.info(applied.length > 0 ? `Applied: ${applied.join(", ")}` : "Schema is up to date.");
} finally {
  await database.close();
}
