/**
 * Restores a subject-access export into an empty database, in one transaction.
 * Imports: pg, errors.ts, export-format.ts, export-sql.ts.
 */
import type pg from "pg";
import { isThreadDeletedError } from "./errors.js";
import * as sql from "./export-sql.js";
import {
  countOf,
  EXPORT_FORMAT,
  EXPORT_VERSION,
  exportHeader,
  exportRecord,
  noCounts,
  type ExportCounts,
  type ExportRecord,
} from "./export-format.js";

/** The file is not an importable export: what is wrong with it, and on which line. */
export class ImportRefused extends Error {}

type ThreadRecord = Extract<ExportRecord, { type: "thread" }>;
type ExportedMessage = Extract<ExportRecord, { type: "message" }>;

/**
 * Restores a subject-access export (export-format.ts) into a database that holds none of its
 * rows: the user's threads with every message (variants and stopped answers, on or off the
 * current path), turns, tool approvals, summaries, agent state, event log, feedback, memories and usage ledger, in one transaction. API
 * keys are not restored (the export never holds their secrets). Refuses, writing nothing, a file
 * of another format or version, a malformed line, or one cut short (no `end` line, or counts that
 * differ); ids already in the database make it fail the same way.
 */
export async function importUserData(
  db: pg.Pool,
  lines: AsyncIterable<string>,
): Promise<ExportCounts & { userId: string }> {
  // Taken before anything is awaited: a line reader (node:readline) emits its lines as soon as it
  // can, and lines emitted before the iterator exists are lost.
  const reader = lines[Symbol.asyncIterator]();
  const client = await db.connect();
  // Checked out, a client's connection error (the server ended the session) has no listener in
  // the pool: without one it would end the process; the next query fails instead.
  client.on("error", () => undefined);
  let failed = false;
  let lineNumber = 0;
  try {
    await client.query("BEGIN");
    const counts = noCounts();
    let userId: string | undefined;
    let thread: ThreadRecord | undefined;
    // What a line may name: the file's threads, and the current thread's messages so far (a
    // thread's messages precede the lines that name them), each with its role.
    const threadIds = new Set<string>();
    let messages = new Map<string, ExportedMessage["role"]>();
    let ended = false;
    for await (const line of { [Symbol.asyncIterator]: () => reader }) {
      lineNumber += 1;
      if (line.trim() === "") continue;
      if (ended) throw new ImportRefused(`line ${lineNumber}: nothing may follow the end line`);
      // A byte order mark, as an editor saving the file may add, is no part of the first line.
      const json = parseJson(lineNumber === 1 ? line.replace(/^\uFEFF/, "") : line, lineNumber);
      if (userId === undefined) {
        const header = exportHeader.safeParse(json);
        if (!header.success)
          throw new ImportRefused(
            `line ${lineNumber}: not a ${EXPORT_FORMAT} file of version ${EXPORT_VERSION} (its first line must be {"type":"export","format":"${EXPORT_FORMAT}","version":${EXPORT_VERSION},...})`,
          );
        userId = header.data.userId;
        continue;
      }
      const parsed = exportRecord.safeParse(json);
      if (!parsed.success)
        throw new ImportRefused(
          `line ${lineNumber}: ${parsed.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`).join("; ")}`,
        );
      const record = parsed.data;
      const inThread = THREAD_RECORDS.has(record.type);
      if (inThread && (record as { threadId: string }).threadId !== thread?.id) {
        throw new ImportRefused(
          `line ${lineNumber}: a ${record.type} of thread ${(record as { threadId: string }).threadId} outside that thread's lines`,
        );
      }
      // A thread's lines end where the next thread or the user's own lines begin.
      if (!inThread && thread) {
        await finishThread(client, thread);
        thread = undefined;
      }
      if (record.type === "export") throw new ImportRefused(`line ${lineNumber}: a second header`);
      if (record.type === "end") {
        const { type: _end, ...expected } = record;
        if (JSON.stringify(expected) !== JSON.stringify(counts))
          throw new ImportRefused(
            `line ${lineNumber}: the end line counts ${JSON.stringify(expected)}, the file holds ${JSON.stringify(counts)}`,
          );
        ended = true;
        continue;
      }
      if (record.type === "thread") {
        thread = record;
        threadIds.add(record.id);
        messages = new Map();
      }
      const foreign = foreignReference(record, messages, threadIds);
      if (foreign) throw new ImportRefused(`line ${lineNumber}: ${foreign}`);
      if (record.type === "message") messages.set(record.id, record.role);
      // An API key is counted, not restored: the export never holds its secret.
      if (record.type !== "api_key") await client.query(...insertOf(record, userId));
      counts[countOf[record.type]] += 1;
    }
    if (userId === undefined) throw new ImportRefused("the file is empty");
    if (!ended) throw new ImportRefused("the export was cut short: its end line is missing");
    await client.query("COMMIT");
    return { userId, ...counts };
  } catch (error) {
    failed = true;
    await client.query("ROLLBACK").catch(() => undefined);
    throw refusalOf(error, lineNumber);
  } finally {
    client.release(failed);
  }
}

const THREAD_RECORDS = new Set<ExportRecord["type"]>([
  "message",
  "turn",
  "summary",
  "agent_state",
  "event",
  "feedback",
  "approval",
]);

type RestoredRecord = Exclude<ExportRecord, { type: "export" | "api_key" | "end" }>;
type Insert<T extends RestoredRecord> = (record: T, userId: string) => [statement: string, params: unknown[]];

/** Each restored record's insert: its statement and the parameters in the statement's order. */
const INSERTS: { [T in RestoredRecord["type"]]: Insert<Extract<RestoredRecord, { type: T }>> } = {
  thread: (r, userId) => [sql.insertThread, [r.id, userId, r.title, r.titleSource, r.metadata, r.createdAt]],
  message: (r, userId) => [
    sql.insertMessage,
    [
      r.id,
      r.threadId,
      userId,
      r.seq,
      r.turnSeq,
      r.role === "assistant" ? "agent" : r.role,
      r.agentName,
      JSON.stringify(r.content),
      r.answers ?? null,
      r.variant ?? null,
      r.position ?? null,
      r.onPath,
      r.stopped ?? false,
      r.clientTimestamp,
      r.createdAt,
      r.parentId ?? null,
      r.parentVariant ?? null,
    ],
  ],
  turn: (r) => [
    sql.insertTurn,
    [
      r.runId,
      r.threadId,
      r.messageId,
      r.kind,
      r.variant,
      r.status,
      r.error,
      r.eventId,
      r.context === undefined || r.context === null ? null : JSON.stringify(r.context),
      r.startedAt,
      r.finishedAt,
    ],
  ],
  summary: (r) => [sql.insertSummary, [r.threadId, r.coversThroughTurnSeq, r.text, r.createdAt, r.updatedAt]],
  agent_state: (r) => [sql.insertAgentState, [r.threadId, r.agentName, JSON.stringify(r.data), r.updatedAt]],
  event: (r) => [
    sql.insertEvent,
    [r.threadId, r.id, r.runId, r.attempt, r.key, r.event, JSON.stringify(r.data), r.createdAt],
  ],
  feedback: (r, userId) => [
    sql.insertFeedback,
    [r.answerId, r.threadId, userId, r.rating, r.comment, r.createdAt, r.updatedAt],
  ],
  approval: (r) => [
    sql.insertApproval,
    [
      r.id,
      r.threadId,
      r.runId,
      r.messageId,
      r.toolCallId,
      r.toolName,
      JSON.stringify(r.arguments ?? null),
      r.status,
      r.decidedBy,
      r.reason,
      r.requestId,
      r.requestedAt,
      r.expiresAt,
      r.decidedAt,
    ],
  ],
  memory: (r, userId) => [sql.insertMemory, [r.id, userId, r.text, r.source, r.threadId, r.createdAt, r.updatedAt]],
  usage: (r, userId) => [
    sql.insertUsage,
    [
      r.key,
      userId,
      r.threadId,
      r.messageId,
      r.variant,
      r.runId,
      r.stepId,
      r.attempt,
      r.provider,
      r.model,
      r.inputTokens,
      r.outputTokens,
      r.cachedTokens,
      r.reasoningTokens,
      r.latencyMs,
      r.costUsd,
      r.failed,
      r.createdAt,
    ],
  ],
};

// The table is typed per record type; TypeScript cannot tie a lookup by `record.type` to it.
const insertOf = (record: RestoredRecord, userId: string) =>
  (INSERTS[record.type] as Insert<RestoredRecord>)(record, userId);

/**
 * What a record names outside its own thread (another thread's message, a thread the file does
 * not hold), said as a refusal; undefined when it names only its own. The foreign keys would take
 * any row of the database, another user's too: an edited file could tie the user's rows to them.
 */
function foreignReference(
  record: ExportRecord,
  messages: ReadonlyMap<string, ExportedMessage["role"]>,
  threadIds: ReadonlySet<string>,
): string | undefined {
  const names = (field: string, id: string, role: ExportedMessage["role"]) =>
    messages.get(id) === role
      ? undefined
      : `${record.type}.${field} names ${id}, not ${role === "user" ? "a user message" : "an answer"} of this file's thread ${(record as { threadId: string }).threadId} before it`;
  switch (record.type) {
    case "message":
      return (
        (record.answers === undefined ? undefined : names("answers", record.answers, "user")) ??
        (record.parentId === undefined ? undefined : names("parentId", record.parentId, "user"))
      );
    case "turn":
      return names("messageId", record.messageId, "user");
    case "feedback":
      return names("answerId", record.answerId, "assistant");
    case "approval":
      return names("messageId", record.messageId, "user");
    case "memory":
      return record.threadId === null || threadIds.has(record.threadId)
        ? undefined
        : `memory.threadId names ${record.threadId}, not a thread of this file`;
    default:
      return undefined;
  }
}

/** The thread's counters and times as exported (inserting its messages moved some). */
async function finishThread(client: pg.PoolClient, thread: ThreadRecord): Promise<void> {
  await client.query(sql.finishThread, [thread.id, thread.updatedAt, thread.lastActivityAt, thread.lastMessageAt]);
  await client.query(sql.setEventCounter, [thread.id, thread.lastEventId ?? 0]);
}

/**
 * The database's refusal of a line's row, as the importer's: which line, and what is wrong with it.
 * A row the schema refuses (class 22, a data exception; class 23, a constraint: a value out of
 * its range, an id naming no row) was edited or cut from the file; a tombstoned thread id
 * (TL410) was deleted here, and a deleted thread is never restored. Any other error is a fault.
 */
function refusalOf(error: unknown, lineNumber: number): unknown {
  if (error instanceof ImportRefused) return error;
  const { code, message, detail } = error as { code?: string; message?: string; detail?: string };
  if (isThreadDeletedError(error))
    return new ImportRefused(
      `line ${lineNumber}: ${message} in this database, and a deleted thread is never restored: to restore the rest, leave out its lines (its thread's, and the memories naming it) and their counts in the end line`,
    );
  if (code === "23505")
    return new ImportRefused(
      `line ${lineNumber}: ${message}: this database already holds rows of this export; restore into one that does not`,
    );
  if (code?.startsWith("22") || code?.startsWith("23"))
    return new ImportRefused(
      `line ${lineNumber}: ${message}${detail ? ` (${detail})` : ""}: the line does not hold what an export writes; restore the file as it was exported`,
    );
  return error;
}

function parseJson(line: string, lineNumber: number): unknown {
  try {
    return JSON.parse(line);
  } catch {
    throw new ImportRefused(`line ${lineNumber}: not JSON`);
  }
}
