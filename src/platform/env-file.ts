import { existsSync } from "node:fs";
import path from "node:path";

/**
 * The settings in `.env` (in the working directory) are read into process.env by Node's own parser,
 * which never replaces a variable the environment already has: the real environment wins. Every
 * entry point (src/main.ts, scripts/*.ts) imports this module first, because modules read the
 * environment as they load (the logger its level and format). The app itself never imports it, so
 * tests never see a developer's `.env`.
 */
function loadEnvFile(file: string): string | undefined {
  const resolved = path.resolve(file);
  if (!existsSync(resolved)) return undefined;
  process.loadEnvFile(resolved);
  return resolved;
}

/** The `.env` file read at start, or undefined when there was none. */
export const envFile = loadEnvFile(".env");
