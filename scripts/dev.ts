// First: the settings of .env, before any module reads the environment.
import { envFile } from "../src/platform/env-file.js";
import { spawn } from "node:child_process";

/**
 * npm run dev — starts Threadline (embedded PostgreSQL unless DATABASE_URL is set) and the
 * Inngest dev server through npx, which fetches it at run time. Where it cannot be fetched the
 * app keeps running and says how to start the dev server elsewhere. With INNGEST_BASE_URL set the
 * dev server runs there (docker compose, another terminal) and none is started here.
 *
 * The settings below take effect however the imports above are ordered: the server reads the
 * environment when startServer runs and builds its Inngest client then (src/platform/inngest-serve.ts).
 */
// Local development on purpose: the Inngest dev server (unsigned requests) and AUTH=dev (the user
// named by the X-Threadline-User header). Production mode refuses both.
process.env.INNGEST_DEV ??= "1";
process.env.AUTH ??= "dev";
process.env.HOST ??= "127.0.0.1"; // this machine only; containers keep the default, every interface
// Human-readable log lines while developing (pino-pretty, a development dependency).
process.env.LOG_FORMAT ??= "pretty";
// Loaded after the settings above: modules read the environment as they load.
const [{ readEnvironment }, { startServer }, { logger }] = await Promise.all([
  import("../src/config.js"),
  import("../src/server.js"),
  import("../src/platform/logger.js"),
]);
if (envFile) logger.info(`settings read from ${envFile} (a variable set in the environment wins over it)`);
const { PORT, INNGEST_BASE_URL } = readEnvironment();
await startServer();

const appUrl = `http://127.0.0.1:${PORT}/api/inngest`;
if (INNGEST_BASE_URL === undefined) {
  const devServer = spawn("npx", ["--yes", "inngest-cli@latest", "dev", "-u", appUrl, "--no-discovery"], {
    stdio: "inherit",
  });
  devServer.on("error", (error) => explain(error.message));
  devServer.on("exit", (code) => {
    if (code !== 0 && code !== null) explain(`exited with code ${code}`);
  });
} else {
  console.info(
    `[threadline] Using the Inngest server at ${INNGEST_BASE_URL} (INNGEST_BASE_URL): register the app there with "-u ${appUrl}".`,
  );
}

function explain(reason: string) {
  console.warn(
    `[threadline] The Inngest dev server could not start here (${reason}): this machine probably cannot download it. ` +
      `Threadline is still serving on port ${PORT}. Run "npx inngest-cli@latest dev -u ${appUrl}" on a machine that can, ` +
      `or use docker compose (docker-compose.yml), then open http://localhost:8288.`,
  );
}
