import type pg from "pg";
import * as sql from "./export-sql.js";
import { countOf, EXPORT_FORMAT, EXPORT_VERSION, type ExportRecord, noCounts } from "./export-format.js";
import { listThreads, type ThreadCursor } from "./threads.js";

/**
 * A user's subject-access export (the format: export-format.ts): everything stored about them,
 * read in keyset batches inside one read-only REPEATABLE READ transaction, so the export is one
 * consistent snapshot (a thread that becomes active while the export runs is neither skipped nor
 * repeated) and memory holds one batch at a time, however much the user has.
 * Imports: pg, export-format.ts, threads.ts and export-sql.ts.
 */

const EXPORT_THREAD_BATCH = 100;
export const EXPORT_MESSAGE_BATCH = 500;

/**
 * How long an export may wait on its reader between two batches. A client that stops reading
 * without closing the connection would otherwise pin a pooled connection and its snapshot (which
 * holds back vacuum) for as long as it likes; past this, PostgreSQL ends the session and the
 * export fails.
 */
const EXPORT_STALL_TIMEOUT = "2min";

const iso = (date: Date) => date.toISOString();
const isoOrNull = (date: Date | null) => (date === null ? null : date.toISOString());

/** Everything stored about the user, record by record (the header first, the counts last). */
export async function* exportUserData(db: pg.Pool, userId: string): AsyncGenerator<ExportRecord> {
  const client = await db.connect();
  // While it waits on its reader, PostgreSQL may end the session (EXPORT_STALL_TIMEOUT): a
  // checked-out client has no error listener in the pool, and an unheard error would end the
  // process. The next query fails instead, and the export ends.
  const onError = () => undefined;
  client.on("error", onError);
  let open = false;
  let failed = false;
  try {
    await client.query(sql.beginSnapshot);
    open = true;
    await client.query(`SET LOCAL idle_in_transaction_session_timeout = '${EXPORT_STALL_TIMEOUT}'`);
    yield {
      type: "export",
      format: EXPORT_FORMAT,
      version: EXPORT_VERSION,
      userId,
      exportedAt: new Date().toISOString(),
    };
    const counts = noCounts();
    let after: ThreadCursor | undefined;
    for (;;) {
      const page = await listThreads(client, { userId, limit: EXPORT_THREAD_BATCH, after });
      for (const thread of page.threads) {
        counts.threads += 1;
        const counter = (await client.query<sql.SelectThreadEventCounterRow>(sql.selectThreadEventCounter, [thread.id]))
          .rows[0];
        yield { type: "thread", ...thread, lastEventId: counter ? Number(counter.last_id) : 0 };
        for await (const record of threadRecords(client, thread.id)) {
          counts[countOf[record.type]] += 1;
          yield record;
        }
      }
      if (!page.next) break;
      after = page.next;
    }
    for await (const memory of userMemories(client, userId)) {
      counts.memories += 1;
      yield memory;
    }
    for (const key of (await client.query<sql.SelectUserApiKeysRow>(sql.selectUserApiKeys, [userId])).rows) {
      counts.apiKeys += 1;
      yield {
        type: "api_key",
        id: key.id,
        name: key.name,
        createdAt: iso(key.created_at),
        revokedAt: isoOrNull(key.revoked_at),
      };
    }
    for await (const usage of userUsage(client, userId)) {
      counts.usageRecords += 1;
      yield usage;
    }
    yield { type: "end", ...counts };
  } catch (error) {
    failed = true;
    throw error;
  } finally {
    // Read-only: ending it with ROLLBACK loses nothing. Also runs when the export is abandoned
    // mid-way (the HTTP client went away); a connection that failed is discarded, not reused.
    if (open && !failed) await client.query("ROLLBACK");
    client.off("error", onError);
    client.release(failed);
  }
}

type ThreadRecord = Extract<
  ExportRecord,
  { type: "message" | "turn" | "summary" | "agent_state" | "event" | "feedback" | "approval" }
>;

/**
 * The rows of a keyset-paged statement whose last parameter is the batch size, batch by batch:
 * `params` gives a batch's other parameters from the previous batch's last row (none before the
 * first). The next batch is read once every row of this one was taken.
 */
async function* keysetRows<Row extends pg.QueryResultRow>(
  client: pg.PoolClient,
  statement: string,
  params: (last: Row | undefined) => unknown[],
): AsyncGenerator<Row> {
  for (let last: Row | undefined; ; ) {
    const { rows } = await client.query<Row>(statement, [...params(last), EXPORT_MESSAGE_BATCH]);
    yield* rows;
    if (rows.length < EXPORT_MESSAGE_BATCH) return;
    last = rows.at(-1)!;
  }
}

/** A thread's messages (all of them, in stored order), turns, summary, agent state, event log, feedback and approvals. */
async function* threadRecords(client: pg.PoolClient, threadId: string): AsyncGenerator<ThreadRecord> {
  const messages = keysetRows<sql.SelectThreadMessagesRow>(client, sql.selectThreadMessages, (last) => [
    threadId,
    last?.seq ?? "0",
  ]);
  for await (const row of messages) {
    yield {
      type: "message",
      threadId,
      id: row.id,
      seq: Number(row.seq),
      turnSeq: Number(row.turn_seq),
      role: row.kind === "agent" ? "assistant" : row.kind,
      agentName: row.agent_name,
      content: row.content,
      onPath: row.on_path,
      createdAt: iso(row.created_at),
      clientTimestamp: isoOrNull(row.client_timestamp),
      ...(row.kind === "agent"
        ? { answers: row.answers!, variant: row.variant!, position: row.position!, stopped: row.stopped }
        : {}),
      ...(row.parent_id === null ? {} : { parentId: row.parent_id, parentVariant: row.parent_variant }),
    };
  }
  const turns = keysetRows<sql.SelectThreadTurnsRow>(client, sql.selectThreadTurns, (last) => [
    threadId,
    last?.cursor_at ?? "-infinity",
    last?.run_id ?? "",
  ]);
  for await (const row of turns) {
    yield {
      type: "turn",
      threadId,
      runId: row.run_id,
      messageId: row.message_id,
      kind: row.kind,
      variant: row.variant,
      status: row.status,
      error: row.error,
      eventId: row.event_id,
      context: row.context,
      startedAt: iso(row.started_at),
      finishedAt: isoOrNull(row.finished_at),
    };
  }
  const summary = (await client.query<sql.SelectThreadSummaryRow>(sql.selectThreadSummary, [threadId])).rows[0];
  if (summary)
    yield {
      type: "summary",
      threadId,
      coversThroughTurnSeq: Number(summary.covers_through_turn_seq),
      text: summary.text,
      createdAt: iso(summary.created_at),
      updatedAt: iso(summary.updated_at),
    };
  for (const state of (await client.query<sql.SelectThreadAgentStateRow>(sql.selectThreadAgentState, [threadId]))
    .rows) {
    yield {
      type: "agent_state",
      threadId,
      agentName: state.agent_name,
      data: state.data,
      updatedAt: iso(state.updated_at),
    };
  }
  const events = keysetRows<sql.SelectThreadEventsRow>(client, sql.selectThreadEvents, (last) => [
    threadId,
    last?.id ?? "0",
  ]);
  for await (const row of events) {
    yield {
      type: "event",
      threadId,
      id: Number(row.id),
      runId: row.run_id,
      attempt: row.attempt,
      key: row.key,
      event: row.event,
      data: row.data,
      createdAt: iso(row.created_at),
    };
  }
  const feedback = keysetRows<sql.SelectThreadFeedbackRow>(client, sql.selectThreadFeedback, (last) => [
    threadId,
    last?.message_id ?? "00000000-0000-0000-0000-000000000000",
  ]);
  for await (const row of feedback) {
    yield {
      type: "feedback",
      threadId,
      answerId: row.message_id,
      rating: row.rating,
      comment: row.comment,
      createdAt: iso(row.created_at),
      updatedAt: iso(row.updated_at),
    };
  }
  const approvals = keysetRows<sql.SelectThreadApprovalsRow>(client, sql.selectThreadApprovals, (last) => [
    threadId,
    last?.id ?? "00000000-0000-0000-0000-000000000000",
  ]);
  for await (const row of approvals) {
    yield {
      type: "approval",
      threadId,
      id: row.id,
      runId: row.run_id,
      messageId: row.message_id,
      toolCallId: row.tool_call_id,
      toolName: row.tool_name,
      arguments: row.arguments,
      status: row.status,
      decidedBy: row.decided_by,
      reason: row.reason,
      requestId: row.request_id,
      requestedAt: iso(row.requested_at),
      expiresAt: iso(row.expires_at),
      decidedAt: isoOrNull(row.decided_at),
    };
  }
}

async function* userMemories(
  client: pg.PoolClient,
  userId: string,
): AsyncGenerator<Extract<ExportRecord, { type: "memory" }>> {
  const memories = keysetRows<sql.SelectUserMemoriesRow>(client, sql.selectUserMemories, (last) => [
    userId,
    last?.cursor_at ?? "infinity",
    last?.id ?? "ffffffff-ffff-ffff-ffff-ffffffffffff",
  ]);
  for await (const row of memories) {
    yield {
      type: "memory",
      id: row.id,
      text: row.text,
      source: row.source,
      threadId: row.thread_id,
      createdAt: iso(row.created_at),
      updatedAt: iso(row.updated_at),
    };
  }
}

async function* userUsage(
  client: pg.PoolClient,
  userId: string,
): AsyncGenerator<Extract<ExportRecord, { type: "usage" }>> {
  const rows = keysetRows<sql.SelectUserUsageRow>(client, sql.selectUserUsage, (last) => [
    userId,
    last?.cursor_at ?? "-infinity",
    last?.key ?? "",
  ]);
  const count = (value: string | null) => (value === null ? null : Number(value));
  for await (const row of rows) {
    yield {
      type: "usage",
      key: row.key,
      threadId: row.thread_id,
      messageId: row.message_id,
      variant: row.variant,
      runId: row.run_id,
      stepId: row.step_id,
      attempt: row.attempt,
      provider: row.provider,
      model: row.model,
      inputTokens: Number(row.input_tokens),
      outputTokens: Number(row.output_tokens),
      cachedTokens: count(row.cached_tokens),
      reasoningTokens: count(row.reasoning_tokens),
      latencyMs: row.latency_ms,
      costUsd: count(row.cost_usd),
      failed: row.failed,
      createdAt: iso(row.created_at),
    };
  }
}
