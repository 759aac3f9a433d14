import { spawn, type ChildProcess } from "node:child_process";
import { createHmac } from "node:crypto";
import { once } from "node:events";
import { readFile } from "node:fs/promises";
import { createServer, request, type Server } from "node:http";
import { connect, type AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { readEnvironment } from "../src/config.js";
import { freePort } from "../src/platform/database.js";
import { INNGEST_MAX_REQUEST_BYTES, signatureHeaderRefusal } from "../src/platform/inngest-serve.js";
import { TEST_JWT } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

// The real server (src/main.ts) as a child process, on this file's database, with its Inngest
// API (INNGEST_BASE_URL) pointed at a loopback stand-in that records every request it gets: a
// sync that the app performs shows there as a POST /fn/register.
const bed = useTestBed();

const SIGNING_KEY = `signkey-prod-${"0123456789abcdef".repeat(4)}`;
const PUBLIC_ORIGIN = "https://chat.example.test";

type Recorded = { method: string; path: string; body: string };
let inngestApi: { url: string; requests: Recorded[]; server: Server };
let running: ChildProcess | undefined;

beforeAll(async () => {
  const requests: Recorded[] = [];
  const server = createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    requests.push({ method: req.method ?? "", path: req.url ?? "", body });
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ok: true, modified: true }));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  inngestApi = { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests, server };
});
afterEach(async () => {
  if (running && running.exitCode === null) {
    running.kill("SIGTERM");
    await once(running, "exit");
  }
  running = undefined;
  inngestApi.requests.length = 0;
});
afterAll(async () => {
  await new Promise((resolve) => inngestApi?.server.close(resolve));
});

/** A production deployment of the app (everything production mode requires), as a child process. */
async function startApp(overrides: Record<string, string | undefined> = {}) {
  const port = await freePort();
  const env: Record<string, string | undefined> = {
    PATH: process.env.PATH,
    NODE_ENV: "production",
    PORT: String(port),
    LOG_LEVEL: "silent",
    DATABASE_URL: bed.db.url,
    INNGEST_SIGNING_KEY: SIGNING_KEY,
    INNGEST_EVENT_KEY: "event-key",
    INNGEST_BASE_URL: inngestApi.url,
    INNGEST_SERVE_ORIGIN: PUBLIC_ORIGIN,
    AUTH_JWT_SECRET: TEST_JWT.secret,
    AUTH_JWT_ISSUER: TEST_JWT.issuer,
    AUTH_JWT_AUDIENCE: TEST_JWT.audience,
    ...overrides,
  };
  const child = spawn(process.execPath, ["--import", "tsx", path.resolve("src/main.ts")], {
    env: Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined)),
    stdio: ["ignore", "pipe", "pipe"],
  });
  running = child;
  let output = "";
  child.stdout?.on("data", (chunk) => (output += chunk));
  child.stderr?.on("data", (chunk) => (output += chunk));
  for (const started = Date.now(); ; ) {
    if (child.exitCode !== null) throw new Error(`the server exited during start-up:\n${output}`);
    if (Date.now() - started > 60_000) throw new Error(`the server did not answer /health:\n${output}`);
    if (
      await fetch(`http://127.0.0.1:${port}/health`).then(
        (response) => response.ok,
        () => false,
      )
    )
      return { child, port };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** A request over a raw socket connection, so the Host header can be anyone's. */
function send(
  port: number,
  method: string,
  headers: Record<string, string>,
  body = "",
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        method,
        path: "/api/inngest",
        headers: { "content-length": String(Buffer.byteLength(body)), ...headers },
      },
      async (res) => {
        let text = "";
        for await (const chunk of res) text += chunk;
        resolve({ status: res.statusCode ?? 0, body: text });
      },
    );
    req.once("error", reject);
    req.end(body);
  });
}

const sign = (body: string, at = Math.floor(Date.now() / 1000)) =>
  `t=${at}&s=${createHmac("sha256", SIGNING_KEY.replace(/^signkey-\w+-/, ""))
    .update(body)
    .update(String(at))
    .digest("hex")}`;

/** Resident set size of a process, from /proc (Linux). */
async function rssBytes(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  return Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)![1]) * 1024;
}

describe("the serve endpoint in production", () => {
  it("refuses an unsigned PUT with a forged Host, and no register call leaves the app", async () => {
    const { port } = await startApp();
    const refused = await send(port, "PUT", { host: "attacker.example:4444" });
    expect(refused.status).toBe(401);
    expect(JSON.parse(refused.body)).toMatchObject({ code: "unsigned", error: expect.stringMatching(/not signed/) });
    // A forged signature header is refused too (by the SDK, once the bounded body is read).
    const forgedBody = JSON.stringify({ url: "http://attacker.example:4444/api/inngest" });
    const forged = await send(
      port,
      "PUT",
      {
        host: "attacker.example:4444",
        "content-type": "application/json",
        "x-inngest-sync-kind": "in_band",
        "x-inngest-signature": `t=${Math.floor(Date.now() / 1000)}&s=${"ab".repeat(32)}`,
      },
      forgedBody,
    );
    expect(forged.status).toBe(401);
    // Give a register call that the refusals might have started time to arrive.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(inngestApi.requests).toEqual([]);

    // Inngest's own sync (signed, in band) is answered, with the configured URL, whatever the
    // request's Host or body say.
    const synced = await send(
      port,
      "PUT",
      {
        host: "attacker.example:4444",
        "content-type": "application/json",
        "x-inngest-sync-kind": "in_band",
        "x-inngest-signature": sign(forgedBody),
      },
      forgedBody,
    );
    expect(synced.status).toBe(200);
    expect(JSON.parse(synced.body)).toMatchObject({ url: `${PUBLIC_ORIGIN}/api/inngest` });
  }, 90_000);

  it("npm run sync (signed with the app's key) syncs a production app; a plausible but wrong signature does not", async () => {
    const { port } = await startApp();
    const guessed = await send(port, "PUT", {
      host: "attacker.example:4444",
      "x-inngest-signature": `t=${Math.floor(Date.now() / 1000)}&s=${"cd".repeat(32)}`,
    });
    expect(guessed.status).toBe(401);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(inngestApi.requests).toEqual([]);

    const sync = spawn(
      process.execPath,
      ["--import", "tsx", path.resolve("scripts/sync.ts"), "--url", `http://127.0.0.1:${port}/api/inngest`],
      {
        env: { PATH: process.env.PATH, INNGEST_SIGNING_KEY: SIGNING_KEY },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let output = "";
    sync.stdout?.on("data", (chunk) => (output += chunk));
    sync.stderr?.on("data", (chunk) => (output += chunk));
    const [code] = await once(sync, "exit");
    expect({ code, output }).toMatchObject({ code: 0, output: expect.stringContaining("[threadline] synced") });
    expect(inngestApi.requests).toHaveLength(1);
    expect(inngestApi.requests[0]).toMatchObject({ method: "POST", path: "/fn/register" });
    expect(JSON.parse(inngestApi.requests[0]!.body)).toMatchObject({ url: `${PUBLIC_ORIGIN}/api/inngest` });
  }, 90_000);

  it("outside production an unsigned PUT still syncs, but announces the configured URL, not the Host", async () => {
    // The stand-in is real: the same request that production refuses reaches it here.
    const { port } = await startApp({ NODE_ENV: undefined, INNGEST_SERVE_PATH: "/chat/api/inngest" });
    const synced = await send(port, "PUT", { host: "attacker.example:4444" });
    expect(synced.status).toBe(200);
    expect(inngestApi.requests).toHaveLength(1);
    expect(inngestApi.requests[0]).toMatchObject({ method: "POST", path: "/fn/register" });
    expect(JSON.parse(inngestApi.requests[0]!.body)).toMatchObject({ url: `${PUBLIC_ORIGIN}/chat/api/inngest` });
  }, 90_000);

  it("answers a 300 MiB unsigned POST with 401 before reading it: the process grows by at most a few MB", async () => {
    const { child, port } = await startApp();
    // A small unsigned POST first: what the process allocates once, on its first such request
    // (code compiled, modules loaded), is not counted as the big body's.
    expect((await send(port, "POST", { "content-type": "application/json" }, "{}")).status).toBe(401);
    const before = await rssBytes(child.pid!);
    let peak = before;
    const sampling = setInterval(
      () =>
        void rssBytes(child.pid!).then(
          (rss) => (peak = Math.max(peak, rss)),
          () => {},
        ),
      20,
    );
    const total = 300 * 1024 * 1024;
    const chunk = Buffer.alloc(1024 * 1024, "x");
    // A raw connection: the server answers and then closes it while the body is still being
    // written, which a client library reports as a write error instead of the answer.
    const response = await new Promise<{ status: number; sent: number }>((resolve, reject) => {
      let sent = 0;
      let answer = "";
      const socket = connect(port, "127.0.0.1");
      const settle = () => {
        const status = /^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1];
        if (status === undefined)
          return reject(new Error(`the connection closed without an answer after ${sent} bytes`));
        resolve({ status: Number(status), sent });
        socket.destroy();
      };
      socket.on("data", (data) => {
        answer += data.toString("latin1");
        if (answer.includes("\r\n")) settle();
      });
      socket.on("error", () => {});
      socket.on("close", settle);
      // Chunked (no Content-Length): the server cannot refuse the size from a header.
      socket.write(
        "POST /api/inngest?fnId=threadline-chat-turn&stepId=step HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
      );
      const frame = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from("\r\n")]);
      const write = () => {
        while (sent < total && !socket.destroyed) {
          sent += chunk.length;
          if (!socket.write(frame)) return void socket.once("drain", write);
        }
        if (!socket.destroyed) socket.write("0\r\n\r\n");
      };
      write();
    });
    clearInterval(sampling);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const growth = Math.max(peak, await rssBytes(child.pid!)) - before;
    console.log(
      `300 MiB unsigned POST: status ${response.status} after ${response.sent / 2 ** 20} MiB sent; app RSS ${(before / 2 ** 20).toFixed(1)} MiB -> peak +${(growth / 2 ** 20).toFixed(1)} MiB`,
    );
    expect(response.status).toBe(401);
    expect(response.sent).toBeLessThan(total);
    expect(growth).toBeLessThan(8 * 2 ** 20);
    // The process still serves.
    expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
  }, 90_000);

  it("answers a signed-looking POST larger than Inngest's largest request with 413, reading at most that much", async () => {
    const { child, port } = await startApp();
    const before = await rssBytes(child.pid!);
    const declared = await send(port, "POST", {
      "content-type": "application/json",
      "x-inngest-signature": sign("{}"),
      "content-length": String(INNGEST_MAX_REQUEST_BYTES + 1),
    });
    expect(declared.status).toBe(413);
    expect(JSON.parse(declared.body)).toMatchObject({ code: "too_large" });
    expect((await rssBytes(child.pid!)) - before).toBeLessThan(8 * 2 ** 20);
  }, 90_000);
});

describe("configuration of the serve endpoint", () => {
  it("reads the public origin and path, refusing what cannot be one", () => {
    expect(readEnvironment({ INNGEST_SERVE_ORIGIN: "https://chat.example.com/" }).INNGEST_SERVE_ORIGIN).toBe(
      "https://chat.example.com",
    );
    expect(() => readEnvironment({ INNGEST_SERVE_ORIGIN: "https://chat.example.com/api" })).toThrow(/origin only/);
    expect(() => readEnvironment({ INNGEST_SERVE_ORIGIN: "chat.example.com" })).toThrow(/http\(s\) origin/);
    expect(() => readEnvironment({ INNGEST_SERVE_PATH: "api/inngest" })).toThrow(/starting with \//);
  });

  it("judges a signature header by its form and age before any body is read", () => {
    const now = 1_800_000_000;
    expect(signatureHeaderRefusal(undefined, now)).toMatch(/not signed/);
    expect(signatureHeaderRefusal("t=1&s=zz", now)).toMatch(/malformed/);
    expect(signatureHeaderRefusal(`t=${now - 301}&s=${"a".repeat(64)}`, now)).toMatch(/expired/);
    expect(signatureHeaderRefusal(`t=${now - 10}&s=${"a".repeat(64)}`, now)).toBeUndefined();
  });
});
