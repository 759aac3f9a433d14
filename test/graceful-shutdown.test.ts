import { spawn, type ChildProcess } from "node:child_process";
import { pathToFileURL } from "node:url";
import { once } from "node:events";
import { chmod, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../src/platform/database.js";

// The real server as a child process on the embedded database (one data directory for the file).
// A slow database is PostgreSQL stopped with SIGSTOP (the postmaster and each of its processes,
// which run in sessions of their own): /health then waits on it.
let dataDir: string;
let running: { app: ChildProcess; postgres: number } | undefined;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), "threadline-shutdown-"));
  await chmod(dataDir, 0o711);
});
afterEach(async () => {
  // A failed test must not leave the server or PostgreSQL behind.
  if (running && running.app.exitCode === null) {
    await signalPostgres(running.postgres, "SIGCONT");
    running.app.kill("SIGKILL");
    process.kill(running.postgres, "SIGINT");
  }
  running = undefined;
});
afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

describe("SIGTERM", () => {
  it("finishes the request in flight, refuses new connections, then stops the embedded database and exits 0", async () => {
    const app = await startApp({ SHUTDOWN_TIMEOUT_MS: "10000" });
    // The start log says where the embedded data is, to find it again (or delete it).
    expect(app.output()).toContain(`embedded PostgreSQL, data in ${path.join(dataDir, "postgres")} `);
    const postgres = await postmasterPid();
    running = { app: app.child, postgres };
    await signalPostgres(postgres, "SIGSTOP");
    let answered = false;
    const inFlight = fetch(`${app.url}/health`).then(async (response) => {
      answered = true;
      return { status: response.status, body: await response.json() };
    });
    await new Promise((resolve) => setTimeout(resolve, 300));

    app.child.kill("SIGTERM");
    await refusesConnections(app.port);
    expect(answered).toBe(false);
    await signalPostgres(postgres, "SIGCONT");

    expect(await inFlight).toEqual({ status: 200, body: { status: "ok", database: "ok" } });
    expect(await app.exitCode).toBe(0);
    expect(await postgresProcessesOf(dataDir)).toEqual([]);
  }, 60_000);

  it("ends open event streams (the notifier closes first) and exits 0 within the timeout", async () => {
    const app = await startApp({ SHUTDOWN_TIMEOUT_MS: "10000" });
    running = { app: app.child, postgres: await postmasterPid() };
    const headers = { "x-threadline-user": "user-1", "content-type": "application/json" };
    const thread = (await (await fetch(`${app.url}/api/threads`, { method: "POST", headers, body: "{}" })).json()) as {
      id: string;
    };
    const stream = await fetch(`${app.url}/api/threads/${thread.id}/events`, { headers });
    expect(stream.status).toBe(200);
    const body = stream.text();

    app.child.kill("SIGTERM");
    expect(await body).toBe("");
    expect(await app.exitCode).toBe(0);
    expect(await postgresProcessesOf(dataDir)).toEqual([]);
  }, 60_000);

  it("cuts requests off after SHUTDOWN_TIMEOUT_MS and exits 1, still stopping the embedded database", async () => {
    const app = await startApp({ SHUTDOWN_TIMEOUT_MS: "300" });
    const postgres = await postmasterPid();
    running = { app: app.child, postgres };
    await signalPostgres(postgres, "SIGSTOP");
    const inFlight = fetch(`${app.url}/health`).then(
      (response) => response.status,
      (error: Error) => error.message,
    );
    await new Promise((resolve) => setTimeout(resolve, 300));

    app.child.kill("SIGTERM");

    expect(await inFlight).toBe("fetch failed");
    await signalPostgres(postgres, "SIGCONT");
    expect(await app.exitCode).toBe(1);
    expect(await postgresProcessesOf(dataDir)).toEqual([]);
  }, 60_000);
});

async function startApp(
  env: Record<string, string>,
): Promise<{ child: ChildProcess; port: number; url: string; exitCode: Promise<number | null>; output: () => string }> {
  const [port, embeddedPort] = [await freePort(), await freePort()];
  const { DATABASE_URL: _external, ...inherited } = process.env;
  // The entry point `npm start` runs, from the data directory: a developer's .env in the project is not read.
  const child = spawn(
    process.execPath,
    ["--import", pathToFileURL(path.resolve("node_modules/tsx/dist/loader.mjs")).href, path.resolve("src/main.ts")],
    {
      cwd: dataDir,
      env: {
        ...inherited,
        INNGEST_DEV: "1",
        AUTH: "dev",
        ...env,
        PORT: String(port),
        DATA_DIR: dataDir,
        EMBEDDED_POSTGRES_PORT: String(embeddedPort),
        LOG_LEVEL: "info",
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let output = "";
  child.stdout?.on("data", (chunk) => (output += chunk));
  child.stderr?.on("data", (chunk) => (output += chunk));
  const exitCode = once(child, "exit").then(([code]) => code as number | null);
  const url = `http://127.0.0.1:${port}`;
  for (const started = Date.now(); ; ) {
    if (child.exitCode !== null) throw new Error(`the server exited during start-up:\n${output}`);
    if (Date.now() - started > 45_000) throw new Error(`the server did not answer /health:\n${output}`);
    if (
      await fetch(`${url}/health`).then(
        (response) => response.ok,
        () => false,
      )
    )
      return { child, port, url, exitCode, output: () => output };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function postmasterPid(): Promise<number> {
  return Number((await readFile(path.join(dataDir, "postgres", "postmaster.pid"), "utf8")).split("\n")[0]);
}

/** Sends `signal` to the postmaster and every process it started. */
async function signalPostgres(postmaster: number, signal: NodeJS.Signals): Promise<void> {
  const children: number[] = [];
  for (const pid of (await readdir("/proc")).filter((name) => /^\d+$/.test(name))) {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
    if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === postmaster) children.push(Number(pid));
  }
  for (const pid of [postmaster, ...children]) process.kill(pid, signal);
}

async function refusesConnections(port: number): Promise<void> {
  for (;;) {
    const socket = connect(port, "127.0.0.1");
    const refused = await new Promise<boolean>((resolve) => {
      socket.once("connect", () => resolve(false));
      socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code === "ECONNREFUSED"));
    });
    socket.destroy();
    if (refused) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Processes whose command line runs PostgreSQL on this data directory (Linux /proc). */
async function postgresProcessesOf(dir: string): Promise<string[]> {
  const found: string[] = [];
  for (const pid of (await readdir("/proc")).filter((name) => /^\d+$/.test(name))) {
    const command = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
    if (command.includes("postgres") && command.includes(dir)) found.push(`${pid}: ${command.replaceAll("\0", " ")}`);
  }
  return found;
}
