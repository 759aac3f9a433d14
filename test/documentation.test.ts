import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { environment } from "../src/config.js";

/** Every .ts file under a folder of the project. */
function typescriptFiles(folder: string): string[] {
  return readdirSync(folder, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".ts"))
    .map((entry) => path.join(entry.parentPath, entry.name));
}

/** The variables a source text reads straight from process.env (`process.env.X`, `process.env["X"]`). */
export function processEnvReads(source: string): string[] {
  return [...source.matchAll(/process\.env(?:\.([A-Z][A-Z0-9_]*)|\[\s*["'`]([A-Z][A-Z0-9_]*)["'`]\s*\])/g)].map(
    (match) => (match[1] ?? match[2])!,
  );
}

/** Each variable the app reads, with where: the zod schema of src/config.ts, then every process.env read in src/ and scripts/. */
function variablesRead(): Map<string, string> {
  const read = new Map(Object.keys(environment.shape).map((name) => [name, "src/config.ts"]));
  for (const file of [...typescriptFiles("src"), ...typescriptFiles("scripts"), "inngest.config.ts"]) {
    for (const name of processEnvReads(readFileSync(file, "utf8"))) if (!read.has(name)) read.set(name, file);
  }
  return read;
}

/** The variables named in the first column of docs/configuration.md's tables. */
function documentedVariables(): Set<string> {
  const rows = readFileSync("docs/configuration.md", "utf8")
    .split("\n")
    .filter((line) => line.startsWith("| `"));
  return new Set(
    rows.flatMap((row) => [...row.split("|")[1]!.matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((match) => match[1]!)),
  );
}

describe("the configuration reference", () => {
  it("finds process.env reads in either spelling (the scan below is not blind)", () => {
    expect(
      processEnvReads(
        `const a = process.env.LOG_LEVEL ?? process.env["PORT"]; process.env.AUTH ??= "dev"; process.env.lower;`,
      ),
    ).toEqual(["LOG_LEVEL", "PORT", "AUTH"]);
  });

  it("docs/configuration.md lists every environment variable the app reads", () => {
    const documented = documentedVariables();
    const missing = [...variablesRead()]
      .filter(([name]) => !documented.has(name))
      .map(([name, file]) => `${name} (read in ${file})`);
    expect(
      missing,
      `docs/configuration.md does not list ${missing.join(", ")}: add a row (variable, default, meaning) to one of its tables`,
    ).toEqual([]);
  });

  it(".env.example mentions every variable the app reads", () => {
    const example = readFileSync(".env.example", "utf8");
    const missing = [...variablesRead()]
      .filter(([name]) => !new RegExp(`\\b${name}\\b`).test(example))
      .map(([name, file]) => `${name} (read in ${file})`);
    expect(
      missing,
      `.env.example does not mention ${missing.join(", ")}: add it, commented, with a line saying what it does`,
    ).toEqual([]);
  });
});

/** Docs written on other branches of the same change (engine, security, data lifecycle, operations): linked before they land. */
const WRITTEN_ELSEWHERE = new Set([
  "docs/engine.md",
  "docs/security.md",
  "docs/data-lifecycle.md",
  "docs/operations.md",
]);

describe("the README", () => {
  const readme = readFileSync("README.md", "utf8");

  it("fits on a few screens (at most 300 lines) and keeps the test command CI runs", () => {
    expect(readme.split("\n").length).toBeLessThanOrEqual(300);
    expect(readme).toContain("npm test");
  });

  it("links only to files that exist, from the README and every page of docs/", () => {
    const pages = ["README.md", ...readdirSync("docs").map((name) => `docs/${name}`)];
    const broken = pages.flatMap((page) =>
      [...readFileSync(page, "utf8").matchAll(/\]\(([^)#\s]+)(#[^)\s]*)?\)/g)]
        .map((match) => match[1]!)
        .filter((target) => !/^[a-z]+:/.test(target))
        .map((target) => path.normalize(path.join(path.dirname(page), target)))
        .filter((target) => !WRITTEN_ELSEWHERE.has(target) && !existsSync(target))
        .map((target) => `${page} → ${target}`),
    );
    expect(broken).toEqual([]);
  });
});
