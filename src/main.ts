// First: the settings of .env, before any module reads the environment.
import { envFile } from "./platform/env-file.js";
import { logger } from "./platform/logger.js";
import { startServer } from "./server.js";

/** `npm start` and the production image: the server on plain node. */
if (envFile) logger.info(`settings read from ${envFile} (a variable set in the environment wins over it)`);
startServer().catch((error: unknown) => {
  // Plain text on stderr: the one thing an operator must read when the process will not start.
  console.error(`[threadline] could not start: ${(error as Error).message}`);
  process.exit(1);
});
