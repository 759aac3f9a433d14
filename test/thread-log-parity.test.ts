import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { CLIENT_KINDS, THREAD_DELETED, THREAD_LOG_KINDS } from "../src/history/thread-log.js";

/**
 * The thread log's vocabulary (src/history/thread-log.ts) is TypeScript; the playground's browser
 * JavaScript and the PL/pgSQL that writes the log cannot import it. These tests read their sources
 * and hold every event kind they name to the vocabulary.
 */

const vocabulary = new Set<string>(THREAD_LOG_KINDS);

const filesIn = (directory: string, extension: string) =>
  existsSync(directory)
    ? readdirSync(directory)
        .filter((name) => name.endsWith(extension))
        .map((name) => path.join(directory, name))
    : [];

const matches = (text: string, pattern: RegExp) => [...text.matchAll(pattern)].map((match) => match[1]!);

describe("the playground's JavaScript and the thread log's vocabulary", () => {
  const sources = filesIn("src/playground", ".js").map((file) => ({ file, text: readFileSync(file, "utf8") }));
  /** The kinds a file compares a row's event with (`event === "…"`, `.event !== "…"`). */
  const handledIn = (text: string) => matches(text, /\bevent\s*[!=]==?\s*"([^"]+)"/g);

  it("handles only kinds the log holds (or the stream's thread.deleted)", () => {
    const handled = sources.flatMap(({ file, text }) => handledIn(text).map((kind) => ({ file, kind })));
    expect(handled.length).toBeGreaterThan(0);
    expect(handled.filter(({ kind }) => !vocabulary.has(kind) && kind !== THREAD_DELETED)).toEqual([]);
  });

  it("handles every kind a client that shows a thread live must act on", () => {
    const handled = new Set(sources.flatMap(({ text }) => handledIn(text)));
    expect(CLIENT_KINDS.filter((kind) => !handled.has(kind))).toEqual([]);
  });
});

describe("the SQL that writes the thread log and its vocabulary", () => {
  // Function bodies live in the migrations, and (once moved there) one file per function.
  const sqlFiles = [
    ...filesIn("src/history/migrations", ".sql"),
    ...filesIn("src/history/schema/functions", ".sql"),
  ].map((file) => ({ file, text: readFileSync(file, "utf8") }));

  /** Kinds a statement writes (`'event', '…'` in a jsonb_build_object) or reads (`event = '…'`). */
  const kindsIn = (text: string) => [
    ...matches(text, /'event',\s*'([^']+)'/g),
    ...matches(text, /\bevent\s*=\s*'([^']+)'/g),
  ];

  /** The exported strings of every module of src/history: its statements, with their templates filled in. */
  async function historyStatements() {
    const modules = readdirSync("src/history", { recursive: true, encoding: "utf8" }).filter((file) =>
      file.endsWith(".ts"),
    );
    const statements: { file: string; text: string }[] = [];
    for (const file of modules) {
      const exported = (await import(path.resolve("src/history", file))) as Record<string, unknown>;
      for (const value of Object.values(exported))
        if (typeof value === "string") statements.push({ file, text: value });
    }
    return statements;
  }

  it("PL/pgSQL and the statements of src/history write and read only kinds the log holds", async () => {
    const named = [...sqlFiles, ...(await historyStatements())].flatMap(({ file, text }) =>
      kindsIn(text).map((kind) => ({ file, kind })),
    );
    expect(named.filter(({ kind }) => !vocabulary.has(kind))).toEqual([]);
    // Every kind the database writes was found (wherever a statement or function body moves to).
    expect(new Set(named.map(({ kind }) => kind))).toEqual(
      new Set([
        "text.delta",
        "turn.retrying",
        "turn.failed",
        "turn.cancelled",
        "turn.stopped",
        "turn.interrupted",
        "turn.skipped",
        "stream.ended",
        "title.changed",
        "tool.approval.requested",
        "tool.approval.decided",
        "tool.approval.expired",
        "thread.path.changed",
        "message.refused",
        "message.failed",
        "message.cancelled",
      ]),
    );
  });
});
