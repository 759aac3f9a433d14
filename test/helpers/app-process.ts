import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import path from "node:path";
import { freePort } from "../../src/platform/database.js";

export type AppProcess = { child: ChildProcess; url: string; output: () => string; stop: () => Promise<void> };

/**
 * Starts one of the app's entry points (scripts/dev.ts, src/main.ts) as a child process with
 * exactly `env` (plus PATH and HOME) on a free port, and resolves once /health answers.
 */
export async function startAppProcess(entry: string, env: Record<string, string>): Promise<AppProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", path.resolve(entry)], {
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "",
      LOG_LEVEL: "silent",
      ...env,
      PORT: String(port),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (chunk) => (output += chunk));
  child.stderr?.on("data", (chunk) => (output += chunk));
  const exited = once(child, "exit");
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    await exited;
  };
  for (const started = Date.now(); ; ) {
    if (child.exitCode !== null) throw new Error(`${entry} exited during start-up:\n${output}`);
    if (Date.now() - started > 45_000) {
      await stop();
      throw new Error(`${entry} did not answer /health:\n${output}`);
    }
    if (
      await fetch(`${url}/health`).then(
        (response) => response.ok,
        () => false,
      )
    )
      return { child, url, output: () => output, stop };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
