import { execFile } from "node:child_process";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);

/** What the app's logger prints for one info line, in a process of its own with exactly `env` (and PATH). */
async function logLine(env: Record<string, string>): Promise<string> {
  const logger = pathToFileURL(path.resolve("src/platform/logger.ts")).href;
  const script = `const { logger } = await import(${JSON.stringify(logger)}); logger.info({ threadId: "t-1" }, "listening");`;
  const { stdout } = await run(
    process.execPath,
    [
      "--import",
      pathToFileURL(path.resolve("node_modules/tsx/dist/loader.mjs")).href,
      "--input-type=module",
      "-e",
      script,
    ],
    {
      env: { PATH: process.env.PATH ?? "", ...env },
    },
  );
  return stdout;
}

describe("log lines", () => {
  it("LOG_FORMAT=pretty (npm run dev's default): a human-readable line, no JSON", async () => {
    const line = await logLine({ LOG_FORMAT: "pretty" });
    expect(line).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: listening\n\s+threadId: "t-1"\n$/);
  });

  it("JSON lines by default, and always in production, whatever LOG_FORMAT says", async () => {
    for (const env of [{}, { NODE_ENV: "production", LOG_FORMAT: "pretty" }] as Record<string, string>[]) {
      expect(JSON.parse(await logLine(env)), JSON.stringify(env)).toMatchObject({
        level: 30,
        name: "threadline",
        threadId: "t-1",
        msg: "listening",
      });
    }
  });
});
