import type pg from "pg";
import { HistoryRefusal, threadNotOwned } from "./errors.js";
import type { AgentContent, HistoryRow } from "./messages.js";
import * as sql from "./sql.js";

/**
 * The storage operations behind the history adapter and the HTTP API. Each one is a single
 * transaction that takes its connection from the pool when it starts, so a step that retries
 * after a lost connection simply runs it again. Every operation is idempotent.
 */

export type TurnKind = "chat" | "regenerate";

export type TurnStart = {
  /** Sequence number of the user message the turn answers. */
  messageSeq: number;
  /** The answer variant this run writes. */
  variant: number;
  /** "skipped": the message already has its answer (a re-run), or left the current path. */
  status: "running" | "skipped";
  skipReason?: string;
};

export async function transaction<T>(db: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await db.connect();
  try {
    await client.query("BEGIN");
    const result = await work(client);
    await client.query("COMMIT");
    return result;
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/** Creates the thread, or checks that an existing one belongs to the user. */
export async function ensureThread(db: pg.Pool, threadId: string, userId: string): Promise<{ created: boolean }> {
  const inserted = await db.query(sql.insertThread, [threadId, userId]);
  if (inserted.rowCount === 1) return { created: true };
  const owner = await db.query<{ user_id: string }>(sql.selectThreadOwner, [threadId]);
  if (owner.rows[0]?.user_id !== userId) throw threadNotOwned(threadId);
  return { created: false };
}

/** Refuses a thread that does not exist or is another user's (a read, no lock). */
export async function checkOwnedThread(db: pg.Pool, threadId: string, userId: string): Promise<void> {
  const owner = await db.query<{ user_id: string }>(sql.selectThreadOwner, [threadId]);
  if (owner.rowCount === 0) throw new HistoryRefusal("thread_not_found", `Thread ${threadId} does not exist.`);
  if (owner.rows[0]!.user_id !== userId) throw threadNotOwned(threadId);
}

async function lockOwnedThread(client: pg.PoolClient, threadId: string, userId: string) {
  const thread = await client.query<{ user_id: string }>(sql.lockThread, [threadId]);
  if (thread.rowCount === 0) {
    throw new HistoryRefusal("thread_not_found", `Thread ${threadId} does not exist: omit threadId to start a new thread.`);
  }
  if (thread.rows[0]!.user_id !== userId) throw threadNotOwned(threadId);
}

async function reserveSeq(client: pg.PoolClient, threadId: string, count: number): Promise<number> {
  const { rows } = await client.query<{ last_seq: string }>(sql.reserveSeq, [threadId, count]);
  return Number(rows[0]!.last_seq) - count + 1;
}

type MessageRow = { id: string; thread_id: string; seq: string; kind: string; content: { text?: string }; on_path: boolean };

/**
 * Stores the user message under the client's id (once, however often it is called) and records
 * the run as a turn on it. A run that calls this again gets the same answer back.
 */
export async function beginTurn(
  db: pg.Pool,
  input: {
    threadId: string;
    userId: string;
    message: { id: string; text: string; clientTimestamp?: string | undefined };
    turn: { runId: string; kind: TurnKind; eventId?: string | undefined };
    /** What the turn's history is made of (policy and its sources), for the debug view. */
    context?: Record<string, unknown> | undefined;
  },
): Promise<TurnStart> {
  const { threadId, userId, message, turn } = input;
  return transaction(db, async (client) => {
    await lockOwnedThread(client, threadId, userId);

    let stored = (await client.query<MessageRow>(sql.selectMessage, [message.id])).rows[0];
    if (stored && (stored.thread_id !== threadId || stored.kind !== "user")) {
      throw new HistoryRefusal(
        "message_conflict",
        `Message id ${message.id} is already used by another message: generate a new messageId for each message.`,
      );
    }
    if (!stored) {
      if (turn.kind === "regenerate") {
        throw new HistoryRefusal("message_not_found", `Message ${message.id} is not a message of thread ${threadId}.`);
      }
      const seq = await reserveSeq(client, threadId, 1);
      await client.query(sql.insertUserMessage, [message.id, threadId, seq, { text: message.text }, message.clientTimestamp ?? null]);
      stored = { id: message.id, thread_id: threadId, seq: String(seq), kind: "user", content: { text: message.text }, on_path: true };
    }
    const messageSeq = Number(stored.seq);

    const existing = (await client.query<{ variant: number; status: string }>(sql.selectTurnByRun, [turn.runId])).rows[0];
    if (existing) {
      return existing.status === "skipped"
        ? { messageSeq, variant: existing.variant, status: "skipped", skipReason: "already recorded as skipped" }
        : { messageSeq, variant: existing.variant, status: "running" };
    }

    const start = await decideTurn(client, { messageId: message.id, onPath: stored.on_path, turn });
    await client.query(sql.insertTurn, [
      turn.runId, threadId, message.id, turn.kind, turn.eventId ?? null, start.variant, start.status, input.context ?? null,
    ]);
    return { messageSeq, ...start };
  });
}

/**
 * Which variant a run writes, or why it writes nothing:
 * - a chat turn answers a message once; running its event again (a re-run) is a recorded no-op,
 *   and two chat runs on an unanswered message share the first variant (the first to store wins);
 * - a regenerate writes a new variant, past any variant a running or completed turn holds, so two
 *   regenerates started together each keep their answer; running the same regenerate event again
 *   reuses its variant.
 */
async function decideTurn(
  client: pg.PoolClient,
  { messageId, onPath, turn }: { messageId: string; onPath: boolean; turn: { kind: TurnKind; eventId?: string | undefined } },
): Promise<Omit<TurnStart, "messageSeq">> {
  const state = (
    await client.query<{ current_variant: number | null; max_variant: number; max_turn_variant: number }>(sql.selectAnswerState, [messageId])
  ).rows[0]!;
  if (!onPath) {
    return { variant: state.max_variant, status: "skipped", skipReason: "the message is no longer on the thread's current path" };
  }
  if (turn.kind === "chat") {
    if (state.current_variant !== null) {
      return { variant: state.current_variant, status: "skipped", skipReason: "the message already has an answer: regenerate it for a new one" };
    }
    return { variant: state.max_variant + 1, status: "running" };
  }
  const earlier = turn.eventId
    ? (await client.query<{ variant: number }>(sql.selectTurnByEvent, [turn.eventId, messageId])).rows[0]
    : undefined;
  if (!earlier) return { variant: Math.max(state.max_variant, state.max_turn_variant) + 1, status: "running" };
  const written = (await client.query<{ n: number }>(sql.countVariantRows, [messageId, earlier.variant])).rows[0]!.n;
  return written > 0
    ? { variant: earlier.variant, status: "skipped", skipReason: "this regenerate event already produced its answer" }
    : { variant: earlier.variant, status: "running" };
}

/**
 * Which rows a history read returns: the last `userMessages` user messages, the current one
 * included, and everything after each (null: all); with `preserveSystemMessages`, also the
 * system and summary rows older than that.
 */
export type HistoryWindow = { userMessages: number | null; preserveSystemMessages: boolean };

/**
 * The current path before the user message at `beforeSeq`, limited to the window. The caller has
 * waited for the earlier turns of the thread first (turn-waits.ts), so their answers are stored.
 */
export async function readHistory(
  db: pg.Pool,
  input: { threadId: string; userId: string; beforeSeq: number; window: HistoryWindow },
): Promise<HistoryRow[]> {
  const { threadId, userId, beforeSeq, window } = input;
  const owner = await db.query<{ user_id: string }>(sql.selectThreadOwner, [threadId]);
  if (owner.rows[0] && owner.rows[0].user_id !== userId) throw threadNotOwned(threadId);
  const earlierUserMessages = window.userMessages === null ? null : Math.max(window.userMessages - 1, 0);
  const { rows } = await db.query<{ id: string; kind: HistoryRow["kind"]; agent_name: string; content: unknown; created_at: Date }>(
    sql.selectHistoryWindow,
    [threadId, beforeSeq, earlierUserMessages, window.preserveSystemMessages],
  );
  return rows.map((row) => ({
    id: row.id,
    kind: row.kind,
    agentName: row.agent_name,
    content: row.content,
    createdAt: row.created_at.toISOString(),
  }));
}

/**
 * Stores a turn's answer as the current variant of its user message and completes the turn.
 * Result ids are derived by the caller, so storing the same answer twice inserts nothing.
 */
export async function storeAnswer(
  db: pg.Pool,
  input: {
    threadId: string;
    userId: string;
    runId: string;
    messageId: string;
    messageSeq: number;
    variant: number;
    /** Regenerating an earlier message takes the turns after it off the current path. */
    detachLaterTurns: boolean;
    results: { id: string; agentName: string; content: AgentContent }[];
    /** Merged into what the turn recorded of its history when it started (e.g. message counts). */
    context?: Record<string, unknown> | undefined;
  },
): Promise<{ inserted: number }> {
  const { threadId, userId, runId, messageId, messageSeq, variant, results } = input;
  return transaction(db, async (client) => {
    await lockOwnedThread(client, threadId, userId);
    const already = (await client.query<{ n: number }>(sql.countVariantRows, [messageId, variant])).rows[0]!.n;
    let inserted = 0;
    if (already === 0 && results.length > 0) {
      await client.query(sql.detachCurrentAnswer, [messageId]);
      if (input.detachLaterTurns) await client.query(sql.detachLaterTurns, [threadId, messageSeq]);
      await client.query(sql.deleteSummaryCovering, [threadId, messageSeq]);
      const first = await reserveSeq(client, threadId, results.length);
      for (const [position, result] of results.entries()) {
        const row = await client.query(sql.insertAgentResult, [
          result.id, threadId, first + position, messageSeq, result.agentName, result.content, messageId, variant, position,
        ]);
        inserted += row.rowCount ?? 0;
      }
    }
    await client.query(sql.completeTurn, [runId]);
    if (input.context) await client.query(sql.mergeTurnContext, [runId, input.context]);
    return { inserted };
  });
}

export async function failTurn(db: pg.Pool, runId: string, error: string): Promise<void> {
  await db.query(sql.failTurn, [runId, error]);
}

type ThreadMessageRow = { user_id: string; id: string | null; kind: string | null; content: { text?: string } | null; on_path: boolean | null };

/** A user message of the user's thread, or the refusal that says which of those it is not. */
async function findUserMessage(db: pg.Pool, { threadId, messageId, userId }: { threadId: string; messageId: string; userId: string }) {
  const row = (await db.query<ThreadMessageRow>(sql.selectThreadMessage, [threadId, messageId])).rows[0];
  if (!row) throw new HistoryRefusal("thread_not_found", `Thread ${threadId} does not exist.`);
  if (row.user_id !== userId) {
    throw new HistoryRefusal("thread_not_owned", `Thread ${threadId} belongs to another user: only its owner can regenerate or list its answers.`);
  }
  if (row.id === null) throw new HistoryRefusal("message_not_found", `Message ${messageId} is not a message of thread ${threadId}.`);
  if (row.kind !== "user") {
    throw new HistoryRefusal(
      "not_a_user_message",
      `Message ${messageId} is an ${row.kind === "agent" ? "assistant answer" : `${row.kind} message`}: regenerate with the id of the user message it answers.`,
    );
  }
  return { text: row.content?.text ?? "", onPath: row.on_path === true };
}

/**
 * The text of a user message that may be regenerated: the user's, in the thread, on its current
 * path (a message that a later regenerate took off the path is no longer part of the conversation).
 */
export async function loadUserMessage(db: pg.Pool, input: { threadId: string; messageId: string; userId: string }): Promise<{ text: string }> {
  const message = await findUserMessage(db, input);
  if (!message.onPath) {
    throw new HistoryRefusal(
      "message_not_on_path",
      `Message ${input.messageId} is no longer on the thread's current path (an earlier message was regenerated): regenerate a message of the current path.`,
    );
  }
  return { text: message.text };
}

export type AnswerVariant = {
  variant: number;
  /** The answer the thread's current path shows. */
  current: boolean;
  createdAt: string;
  results: { id: string; agentName: string; content: unknown }[];
};

/** Every answer variant of one of the user's messages, the superseded ones included. */
export async function listAnswerVariants(db: pg.Pool, input: { threadId: string; messageId: string; userId: string }): Promise<AnswerVariant[]> {
  await findUserMessage(db, input);
  const { rows } = await db.query<{ id: string; variant: number; agent_name: string; content: unknown; on_path: boolean; created_at: Date }>(
    sql.selectAnswerVariants,
    [input.messageId],
  );
  const variants: AnswerVariant[] = [];
  for (const row of rows) {
    let variant = variants.at(-1);
    if (variant?.variant !== row.variant) {
      variant = { variant: row.variant, current: row.on_path, createdAt: row.created_at.toISOString(), results: [] };
      variants.push(variant);
    }
    variant.results.push({ id: row.id, agentName: row.agent_name, content: row.content });
  }
  return variants;
}

export type ThreadDebug = {
  threadId: string;
  /** The latest turn that ran, with what its history was made of (policy, sources, counts). */
  latestTurn: {
    runId: string;
    messageId: string;
    kind: string;
    variant: number;
    status: string;
    error: string | null;
    context: unknown;
    startedAt: string;
    finishedAt: string | null;
  } | null;
  /** Messages of each kind: on the current path, and stored in all (old variants included). */
  messages: Record<string, { onPath: number; stored: number }>;
};

/** What a developer needs to see why the model saw what it saw, scoped by the thread's owner. */
export async function threadDebug(db: pg.Pool, threadId: string, userId: string): Promise<ThreadDebug> {
  await checkOwnedThread(db, threadId, userId);
  const [turn, counts] = await Promise.all([
    db.query(sql.selectLatestTurn, [threadId]),
    db.query<{ kind: string; on_path: number; stored: number }>(sql.countThreadMessages, [threadId]),
  ]);
  const latest = turn.rows[0];
  return {
    threadId,
    latestTurn: latest
      ? {
          runId: latest.run_id,
          messageId: latest.message_id,
          kind: latest.kind,
          variant: latest.variant,
          status: latest.status,
          error: latest.error,
          context: latest.context,
          startedAt: latest.started_at.toISOString(),
          finishedAt: latest.finished_at ? latest.finished_at.toISOString() : null,
        }
      : null,
    messages: Object.fromEntries(counts.rows.map((row) => [row.kind, { onPath: row.on_path, stored: row.stored }])),
  };
}

export async function checkDatabase(db: pg.Pool): Promise<void> {
  await db.query("SELECT 1");
}
