import { spawn } from "node:child_process";
import { once } from "node:events";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../src/platform/database.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();
const stops: (() => Promise<unknown>)[] = [];
afterAll(() => Promise.all(stops.map((stop) => stop())));

/** The real server as a child process on the test's database, listening on `host`. */
async function startOn(host: string) {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", path.resolve("src/main.ts")], {
    env: {
      ...process.env,
      INNGEST_DEV: "1",
      AUTH: "dev",
      DATABASE_URL: bed.db.url,
      HOST: host,
      PORT: String(port),
      LOG_LEVEL: "silent",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stderr.on("data", (chunk) => (output += chunk));
  const exited = once(child, "exit");
  stops.push(() => (child.exitCode === null ? (child.kill("SIGTERM"), exited) : Promise.resolve()));
  const answers = (address: string) =>
    fetch(`http://${address}:${port}/health`).then(
      (response) => response.ok,
      () => false,
    );
  for (const started = Date.now(); !(await answers(host)); ) {
    if (child.exitCode !== null || Date.now() - started > 45_000)
      throw new Error(`the server did not start on ${host}:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { answers };
}

describe("HOST: the interface the server listens on", () => {
  it("listens only where HOST says: 127.0.0.2 answers, 127.0.0.1 (another loopback address) is refused", async () => {
    const server = await startOn("127.0.0.2");
    expect(await server.answers("127.0.0.2")).toBe(true);
    expect(await server.answers("127.0.0.1")).toBe(false);
  }, 60_000);
});
