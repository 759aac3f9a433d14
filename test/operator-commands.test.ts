import { execFile, execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

/**
 * The operator commands as the production image runs them: compiled by the build (tsc with
 * tsconfig.build.json, as `npm run build` does, into a directory of this test's own), started with
 * plain `node` from a directory whose node_modules holds the production dependencies only
 * (`npm ls --omit=dev`), so a compiled file that imports a devDependency fails here as in the image.
 */
const bed = useTestBed();
const run = promisify(execFile);

let install: string;
beforeAll(() => {
  install = mkdtempSync(path.join(os.tmpdir(), "threadline-production-"));
  execFileSync(
    process.execPath,
    ["node_modules/typescript/bin/tsc", "-p", "tsconfig.build.json", "--outDir", path.join(install, "dist")],
    { stdio: "pipe" },
  );
  cpSync("src/history/migrations", path.join(install, "dist/src/history/migrations"), { recursive: true });
  cpSync("src/history/schema/functions", path.join(install, "dist/src/history/schema/functions"), { recursive: true });
  cpSync("package.json", path.join(install, "package.json"));
  // The production dependency tree, each top-level package linked into the install's node_modules.
  const root = path.resolve("node_modules");
  const production = execFileSync("npm", ["ls", "--omit=dev", "--all", "--parseable"], { encoding: "utf8" }).split(
    "\n",
  );
  for (const dir of new Set(
    production.filter(
      (dir) =>
        path.dirname(dir) === root ||
        (path.dirname(path.dirname(dir)) === root && path.basename(path.dirname(dir)).startsWith("@")),
    ),
  )) {
    const link = path.join(install, "node_modules", path.relative(root, dir));
    mkdirSync(path.dirname(link), { recursive: true });
    symlinkSync(dir, link);
  }
}, 240_000);
afterAll(() => rmSync(install, { recursive: true, force: true }));

/** `node <file> <args>` in the production install, with exactly `env` (and PATH). */
async function node(args: string[], env: Record<string, string> = {}) {
  return run(process.execPath, args, { cwd: install, env: { PATH: process.env.PATH ?? "", ...env } }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => ({
      code: error.code,
      stdout: error.stdout,
      stderr: error.stderr,
    }),
  );
}

/** A database no command can reach: one that tried would fail. */
const NOWHERE = "postgres://postgres@127.0.0.1:1/nowhere";

describe("the compiled operator commands, on a production install", () => {
  it("the install really lacks the devDependencies (tsx, vitest, pino-pretty cannot be imported)", async () => {
    for (const devDependency of ["tsx", "vitest", "pino-pretty"]) {
      const result = await node(["--input-type=module", "-e", `await import(${JSON.stringify(devDependency)})`]);
      expect(result.code, devDependency).not.toBe(0);
      expect(result.stderr).toContain("Cannot find package");
    }
  });

  it.each(["api-keys", "delete-user", "budget", "migrate", "import", "sync"])(
    "node dist/scripts/%s.js --help prints its usage and exits 0 without opening a database",
    async (command) => {
      const result = await node([`dist/scripts/${command}.js`, "--help"], { DATABASE_URL: NOWHERE });
      expect(result.stderr).toBe("");
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(new RegExp(`^Usage: node dist/scripts/${command}\\.js`));
    },
  );

  it("node dist/scripts/api-keys.js create makes a key that the API accepts; the database comes from .env", async () => {
    writeFileSync(path.join(install, ".env"), `# the operator's settings\nDATABASE_URL=${bed.db.url}\n`);
    try {
      const created = await node(["dist/scripts/api-keys.js", "create", "--user", "ops-user", "--name", "first key"]);
      expect(created.stderr).toBe("");
      expect(created.code).toBe(0);
      const key = /^(tl_\S+)$/m.exec(created.stdout)?.[1];
      expect(key, created.stdout).toBeDefined();
      const { app } = createTestApp(bed.db.pool);
      expect((await app.request("/api/threads", { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
      expect((await node(["dist/scripts/migrate.js"])).stdout).toContain("Schema is up to date.");
    } finally {
      rmSync(path.join(install, ".env"));
    }
  });

  it("a variable set in the environment wins over .env", async () => {
    writeFileSync(path.join(install, ".env"), `DATABASE_URL=${NOWHERE}\nTHREADLINE_FROM_FILE=file\n`);
    try {
      const listed = await node(["dist/scripts/api-keys.js", "list", "--user", "ops-user"], {
        DATABASE_URL: bed.db.url,
      });
      expect(listed.stderr).toBe("");
      expect(listed.stdout).toContain('name="first key"');
      const read = await node(
        [
          "--input-type=module",
          "-e",
          `await import("./dist/src/platform/env-file.js"); console.log(process.env.THREADLINE_FROM_FILE, process.env.DATABASE_URL)`,
        ],
        { DATABASE_URL: "from-environment" },
      );
      expect(read.stdout.trim()).toBe("file from-environment");
    } finally {
      rmSync(path.join(install, ".env"));
    }
  });
});

describe("the Dockerfile (as far as this machine, without docker, can check it)", () => {
  const dockerfile = readFileSync("Dockerfile", "utf8");

  it("copies into its build stage everything the build compiles, and runs a file the build makes", () => {
    const buildStage = dockerfile.slice(0, dockerfile.indexOf("RUN npm run build"));
    const copied = [...buildStage.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((match) => match[1]!.split(/\s+/));
    const { include } = JSON.parse(readFileSync("tsconfig.build.json", "utf8")) as { include: string[] };
    expect(include.filter((entry) => !copied.includes(entry))).toEqual([]);
    const command = JSON.parse(/^CMD (\[.*\])$/m.exec(dockerfile)![1]!) as string[];
    const entry = command.find((part) => part.startsWith("dist/"))!;
    expect(existsSync(path.join(install, entry)), entry).toBe(true);
    expect(JSON.parse(readFileSync("package.json", "utf8")).scripts.start).toContain(entry);
  });
});

describe("every entry point reads .env before anything else", () => {
  it.each([
    "src/main.ts",
    "scripts/dev.ts",
    "scripts/api-keys.ts",
    "scripts/delete-user.ts",
    "scripts/budget.ts",
    "scripts/migrate.ts",
    "scripts/import.ts",
    "scripts/sync.ts",
  ])("%s imports env-file first", (file) => {
    const firstImport = readFileSync(file, "utf8")
      .split("\n")
      .find((line) => line.startsWith("import "));
    expect(firstImport).toMatch(/^import (\{ envFile \} from )?"\.\.?\/(src\/)?platform\/env-file\.js";$/);
  });
});
