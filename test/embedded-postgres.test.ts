import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { appendFile, chmod, lstat, mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPool, startEmbeddedPostgres, type EmbeddedServer } from "../src/platform/database.js";
import { appendEvents } from "../src/history/events.js";
import { migrate } from "../src/history/migrate.js";
import { createEventNotifier } from "../src/stream/notifier.js";
import { createTestApp } from "./helpers/http.js";
import { openEventStream } from "./helpers/sse.js";

// Two servers for the whole file (an initdb takes seconds): one whose data directory lies under a
// directory only its owner can enter, one in a plain directory that the crash scenarios reuse.
let base: string;
let closedPath: string;
let plainPath: string;
let closedServer: EmbeddedServer;
let plainServer: EmbeddedServer;

beforeAll(async () => {
  base = await mkdtemp(path.join(tmpdir(), "threadline-embedded-"));
  await chmod(base, 0o711);
  await mkdir(path.join(base, "closed"), { mode: 0o700 });
  closedPath = path.join(base, "closed", "project", ".data", "postgres");
  plainPath = path.join(base, "plain", "postgres");
  [closedServer, plainServer] = await Promise.all([
    startEmbeddedPostgres(closedPath, "free"),
    startEmbeddedPostgres(plainPath, "free"),
  ]);
}, 120_000);

afterAll(async () => {
  await Promise.allSettled([closedServer?.stop(), plainServer?.stop()]);
  if (closedServer && !closedServer.dataDir.startsWith(base))
    await rm(closedServer.dataDir, { recursive: true, force: true });
  await rm(base, { recursive: true, force: true });
});

describe("embedded PostgreSQL", () => {
  it("starts two servers at once, each on a free port and its own data directory", async () => {
    expect(closedServer.port).not.toBe(plainServer.port);
    expect(await query(closedServer, "SHOW data_directory")).toBe(closedServer.dataDir);
    expect(await query(plainServer, "SHOW data_directory")).toBe(plainServer.dataDir);
  });

  it("serves a thread's event stream live: LISTEN/NOTIFY through the app's notifier on the embedded server", async () => {
    await closedServer.createDatabaseIfMissing("threadline_events");
    const url = closedServer.urlFor("threadline_events");
    await migrate(url);
    const pool = createPool(url);
    const events = createEventNotifier(pool);
    try {
      const threadId = randomUUID();
      await pool.query("INSERT INTO threads (id, user_id) VALUES ($1, 'user-1')", [threadId]);
      const stream = await openEventStream(createTestApp(pool, { events }).app, threadId);
      await appendEvents(pool, {
        threadId,
        runId: "run-1",
        attempt: 0,
        events: [{ key: "k", event: "text.delta", data: { partId: "p", messageId: "m", delta: "live" } }],
      });
      await stream.waitFor(1);
      expect(stream.received).toEqual([
        { id: 1, event: "text.delta", data: { partId: "p", messageId: "m", delta: "live" } },
      ]);
      await stream.close();
    } finally {
      await events.close();
      await pool.end();
    }
  });

  it("runs when its data directory lies under a directory other users cannot enter, and finds its data again", async () => {
    expect((await stat(path.join(base, "closed"))).mode & 0o777).toBe(0o700);
    await query(closedServer, "CREATE TABLE kept (value text); INSERT INTO kept VALUES ('still here')");
    if (process.getuid?.() === 0) {
      // As root the server runs as the postgres OS user, who cannot enter "closed": the data lives where it can, linked.
      expect((await lstat(closedPath)).isSymbolicLink()).toBe(true);
      expect(closedServer.dataDir.startsWith(base)).toBe(false);
    }
    await closedServer.stop();
    closedServer = await startEmbeddedPostgres(closedPath, "free");
    expect(await query(closedServer, "SELECT value FROM kept")).toBe("still here");
  });

  it("refuses a second start on a running server's data directory, naming its owner, and never advises deleting postmaster.pid", async () => {
    const refused = startEmbeddedPostgres(plainPath, "free");
    await expect(refused).rejects.toThrow(new RegExp(`still running \\(pid ${process.pid}, this one\\)`));
    await expect(refused).rejects.toThrow(/Do not delete postmaster\.pid/);
    expect(await query(plainServer, "SELECT 'untouched'")).toBe("untouched");
  });

  it("after its owner was killed with SIGKILL, stops the server it left running and starts again", async () => {
    await plainServer.stop();
    const owner = spawn(
      process.execPath,
      ["--import", "tsx", path.resolve("test/helpers/embedded-postgres-owner.ts"), plainPath],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    const [port] = (await once(owner.stdout, "data")) as [Buffer];
    expect(Number(port.toString())).toBeGreaterThan(0);
    const orphan = await postmasterPid(plainPath);
    owner.kill("SIGKILL");
    await once(owner, "exit");
    expect(isAlive(orphan)).toBe(true);

    plainServer = await startEmbeddedPostgres(plainPath, "free");

    expect(isAlive(orphan)).toBe(false);
    expect(await query(plainServer, "SELECT 'recovered'")).toBe("recovered");
  });

  it("starts after a crash that killed PostgreSQL too, recovering the data it had committed", async () => {
    await query(plainServer, "CREATE TABLE committed (value text); INSERT INTO committed VALUES ('durable')");
    const postmaster = await postmasterPid(plainPath);
    process.kill(-postmaster, "SIGKILL");
    while (isAlive(postmaster)) await new Promise((resolve) => setTimeout(resolve, 20));

    await plainServer.start();

    expect(await query(plainServer, "SELECT value FROM committed")).toBe("durable");
  });

  it("removes a postmaster.pid whose pid now belongs to another program", async () => {
    await plainServer.stop();
    const other = spawn("sleep", ["30"]);
    await writeFile(path.join(plainPath, "postmaster.pid"), `${other.pid}\n${plainPath}\n`);
    try {
      await plainServer.start();
      expect(await postmasterPid(plainPath)).not.toBe(other.pid);
    } finally {
      other.kill();
    }
  });

  it("says when its port is taken", async () => {
    await plainServer.stop();
    const taken = createServer().listen(0, "127.0.0.1");
    await once(taken, "listening");
    const port = (taken.address() as { port: number }).port;
    try {
      await expect(startEmbeddedPostgres(plainPath, port)).rejects.toThrow(
        new RegExp(`Port ${port} on 127.0.0.1 is in use.*set EMBEDDED_POSTGRES_PORT`),
      );
    } finally {
      taken.close();
    }
  });

  it("puts PostgreSQL's own log in the error when it stops during start-up", async () => {
    const conf = path.join(plainPath, "postgresql.conf");
    const original = await readFile(conf, "utf8");
    await appendFile(conf, "\nnot_a_setting = on\n");
    try {
      await expect(plainServer.start()).rejects.toThrow(
        /stopped during start-up[\s\S]*unrecognized configuration parameter "not_a_setting"/,
      );
    } finally {
      await writeFile(conf, original);
    }
    await plainServer.start();
    expect(await query(plainServer, "SELECT 'back'")).toBe("back");
  });

  it("gives a data directory of another PostgreSQL major version its own message", async () => {
    const foreign = path.join(base, "foreign");
    await mkdir(foreign, { mode: 0o700 });
    await writeFile(path.join(foreign, "PG_VERSION"), "9\n");
    await expect(startEmbeddedPostgres(foreign, "free")).rejects.toThrow(
      /was created by PostgreSQL 9, but the embedded PostgreSQL is version \d+, which cannot open it.*pg_dumpall/,
    );
  });
});

async function query(server: EmbeddedServer, sql: string): Promise<unknown> {
  const client = new pg.Client({ connectionString: server.urlFor("postgres") });
  await client.connect();
  try {
    const results = await client.query(sql);
    const last = Array.isArray(results) ? results.at(-1) : results;
    return last?.rows[0] ? Object.values(last.rows[0])[0] : undefined;
  } finally {
    await client.end();
  }
}

async function postmasterPid(dataDir: string): Promise<number> {
  return Number((await readFile(path.join(dataDir, "postmaster.pid"), "utf8")).split("\n")[0]);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
