// npm run build (dist/: what npm start and the Dockerfile run) and npm run build:bench
// (dist-bench/: the same app compiled beside bench/turn.ts): tsc with the given project, then the
// files tsc does not emit (migrations, the schema's SQL, the playground) beside the compiled code.
// Usage: node scripts/build.mjs <out dir> <tsconfig>; the out dir is the tsconfig's outDir.
import { execFileSync } from "node:child_process";
import { cpSync, rmSync } from "node:fs";
import { createRequire } from "node:module";

const [outDir, project] = process.argv.slice(2);
if (!outDir || !project) throw new Error("usage: node scripts/build.mjs <out dir> <tsconfig>");
rmSync(outDir, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
execFileSync(process.execPath, [tsc, "-p", project, "--outDir", outDir], { stdio: "inherit" });
cpSync("src/history/migrations", `${outDir}/src/history/migrations`, { recursive: true });
cpSync("src/history/schema", `${outDir}/src/history/schema`, { recursive: true, filter: (f) => !f.endsWith(".ts") });
cpSync("src/playground", `${outDir}/src/playground`, { recursive: true });
