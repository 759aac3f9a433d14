import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

/**
 * Which folder of src/ may import which (src/README.md tells the same map in words). A folder not
 * named on the left may import anything; the entry points (src/main.ts, src/server.ts, src/config.ts)
 * compose everything.
 */
const FORBIDDEN: Record<string, { folders: string[]; packages?: string[]; pure?: string[]; why: string }> = {
  agents: {
    folders: ["api", "auth", "functions", "history", "memory", "platform", "stream"],
    packages: ["pg"],
    // The stored message shapes are plain schemas; types cost nothing at run time.
    pure: ["src/history/messages.ts"],
    why: "agents never touch storage: the functions hand them what they need",
  },
  history: {
    folders: ["api", "auth", "functions", "memory", "stream"],
    why: "storage knows nothing of routes, functions or delivery",
  },
  stream: { folders: ["api", "auth", "functions", "memory"], why: "delivery reads the log; routes call it" },
  auth: { folders: ["api", "functions", "agents", "memory", "stream"], why: "identity stands below the routes" },
  platform: {
    folders: ["api", "auth", "functions", "agents", "history", "memory", "stream"],
    why: "process plumbing is the bottom layer",
  },
  api: { folders: ["functions"], why: "routes send events to functions, never call them" },
  playground: {
    folders: ["agents", "api", "auth", "functions", "history", "memory", "platform", "stream"],
    why: "the page runs in the browser: it has only its own modules",
  },
};

/** Files that may break their folder's rule, each with its reason. */
const EXCEPTIONS: Record<string, string> = {};

// Type-only imports (`import type`) are allowed everywhere: they vanish at run time.

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return /\.(ts|js)$/.test(entry.name) ? [full] : [];
  });
}

const IMPORT = /(?:^|\s)(?:import|export)\s([^;]*?)from\s*"([^"]+)"|import\(\s*"([^"]+)"\s*\)|^import\s+"([^"]+)"/gm;

type Import = { specifier: string; typeOnly: boolean };

function importsOf(file: string): Import[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(IMPORT)].map((match) => ({
    specifier: (match[2] ?? match[3] ?? match[4])!,
    typeOnly: match[1]?.trimStart().startsWith("type ") ?? false,
  }));
}

/** The src/ folder a file belongs to ("" for a file directly in src/). */
const folderOf = (file: string) => {
  const parts = path.relative("src", file).split(path.sep);
  return parts.length > 1 ? parts[0]! : "";
};

function violations(): string[] {
  const found: string[] = [];
  for (const file of sourceFiles("src")) {
    const rule = FORBIDDEN[folderOf(file)];
    if (!rule || EXCEPTIONS[file]) continue;
    for (const { specifier, typeOnly } of importsOf(file)) {
      if (specifier.startsWith(".")) {
        const target = path.normalize(path.join(path.dirname(file), specifier));
        const folder = target.startsWith(`src${path.sep}`) ? folderOf(target) : "";
        const pure = typeOnly || rule.pure?.includes(target.replace(/\.js$/, ".ts"));
        if (rule.folders.includes(folder) && !pure) found.push(`${file} imports ${target} (${rule.why})`);
      } else if (rule.packages?.includes(specifier.split("/")[0]!)) {
        found.push(`${file} imports the package ${specifier} (${rule.why})`);
      }
    }
  }
  return found;
}

describe("import direction inside src/", () => {
  it("finds the imports it checks", () => {
    // A pattern that matched nothing would pass every rule.
    expect(importsOf("src/server.ts").filter((i) => i.specifier.startsWith("./api/")).length).toBeGreaterThan(5);
    expect(importsOf("src/history/events.ts").length).toBeGreaterThan(0);
  });

  it("follows the folder map", () => {
    expect(violations()).toEqual([]);
  });
});
