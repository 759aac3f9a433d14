import { startEmbeddedPostgres } from "../../src/platform/database.js";

/**
 * A process that starts an embedded PostgreSQL on the data directory in argv[2], prints its
 * port, and runs until it is killed: the test kills it with SIGKILL to leave the server behind.
 */
const server = await startEmbeddedPostgres(process.argv[2]!, "free");
process.stdout.write(`${server.port}\n`);
setInterval(() => undefined, 60_000);
