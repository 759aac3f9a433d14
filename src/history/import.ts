/**
 * Restores a subject-access export into an empty database, in one transaction.
 * Imports: pg, export-format.ts, export-sql.ts.
 */
import type pg from "pg";
import * as sql from "./export-sql.js";
import {
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

/**
 * Restores a subject-access export (export-format.ts) into a database that holds none of its
 * rows: the user's threads with every message (variants and stopped answers, on or off the
 * current path), turns, summaries, agent state, event log and memories, in one transaction. API
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
    let ended = false;
    for await (const line of { [Symbol.asyncIterator]: () => reader }) {
      lineNumber += 1;
      if (line.trim() === "") continue;
      if (ended) throw new ImportRefused(`line ${lineNumber}: nothing may follow the end line`);
      const json = parseJson(line, lineNumber);
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
      switch (record.type) {
        case "export":
          throw new ImportRefused(`line ${lineNumber}: a second header`);
        case "thread":
          thread = record;
          await client.query(sql.insertThread, [
            record.id,
            userId,
            record.title,
            record.titleSource,
            record.metadata,
            record.createdAt,
          ]);
          counts.threads += 1;
          break;
        case "message":
          await client.query(sql.insertMessage, [
            record.id,
            record.threadId,
            userId,
            record.seq,
            record.turnSeq,
            record.role === "assistant" ? "agent" : record.role,
            record.agentName,
            JSON.stringify(record.content),
            record.answers ?? null,
            record.variant ?? null,
            record.position ?? null,
            record.onPath,
            record.stopped ?? false,
            record.clientTimestamp,
            record.createdAt,
          ]);
          counts.messages += 1;
          break;
        case "turn":
          await client.query(sql.insertTurn, [
            record.runId,
            record.threadId,
            record.messageId,
            record.kind,
            record.variant,
            record.status,
            record.error,
            record.eventId,
            record.context === undefined || record.context === null ? null : JSON.stringify(record.context),
            record.startedAt,
            record.finishedAt,
          ]);
          counts.turns += 1;
          break;
        case "summary":
          await client.query(sql.insertSummary, [
            record.threadId,
            record.coversThroughTurnSeq,
            record.text,
            record.createdAt,
            record.updatedAt,
          ]);
          counts.summaries += 1;
          break;
        case "agent_state":
          await client.query(sql.insertAgentState, [
            record.threadId,
            record.agentName,
            JSON.stringify(record.data),
            record.updatedAt,
          ]);
          counts.agentStates += 1;
          break;
        case "event":
          await client.query(sql.insertEvent, [
            record.threadId,
            record.id,
            record.runId,
            record.attempt,
            record.key,
            record.event,
            JSON.stringify(record.data),
            record.createdAt,
          ]);
          counts.events += 1;
          break;
        case "memory":
          await client.query(sql.insertMemory, [
            record.id,
            userId,
            record.text,
            record.source,
            record.threadId,
            record.createdAt,
            record.updatedAt,
          ]);
          counts.memories += 1;
          break;
        case "api_key":
          counts.apiKeys += 1;
          break;
        case "end": {
          const { type: _end, ...expected } = record;
          if (JSON.stringify(expected) !== JSON.stringify(counts))
            throw new ImportRefused(
              `line ${lineNumber}: the end line counts ${JSON.stringify(expected)}, the file holds ${JSON.stringify(counts)}`,
            );
          ended = true;
          break;
        }
      }
    }
    if (userId === undefined) throw new ImportRefused("the file is empty");
    if (!ended) throw new ImportRefused("the export was cut short: its end line is missing");
    await client.query("COMMIT");
    return { userId, ...counts };
  } catch (error) {
    failed = true;
    await client.query("ROLLBACK").catch(() => undefined);
    if ((error as { code?: string }).code === "23505") {
      throw new ImportRefused(
        `line ${lineNumber}: ${(error as Error).message}: this database already holds rows of this export; restore into one that does not`,
      );
    }
    throw error;
  } finally {
    client.release(failed);
  }
}

const THREAD_RECORDS = new Set<ExportRecord["type"]>(["message", "turn", "summary", "agent_state", "event"]);

/** The thread's counters and times as exported (inserting its messages moved some). */
async function finishThread(client: pg.PoolClient, thread: ThreadRecord): Promise<void> {
  await client.query(sql.finishThread, [thread.id, thread.updatedAt, thread.lastActivityAt, thread.lastMessageAt]);
  await client.query(sql.setEventCounter, [thread.id]);
}

function parseJson(line: string, lineNumber: number): unknown {
  try {
    return JSON.parse(line);
  } catch {
    throw new ImportRefused(`line ${lineNumber}: not JSON`);
  }
}
