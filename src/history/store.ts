import type pg from "pg";
import { HistoryRefusal, isThreadDeletedError, threadDeleted, threadNotOwned } from "./errors.js";
import { type BusyPolicy, DEFAULT_BUSY_POLICY } from "./busy-policy.js";
import { logRefusal, threadBusyFromError } from "./busy.js";
import type { AgentContent, HistoryRow } from "./messages.js";
import * as sql from "./store-sql.js";
import { type UsageRecord, usageValues } from "./usage.js";

/**
 * The storage operations behind the history adapter and the HTTP API. Each history step of a
 * turn is one statement (one round trip, atomic on its own), so a step that retries after a lost
 * connection simply runs it again, and no thread lock is held across round trips. Every
 * operation is idempotent, and refuses before it writes anything.
 * Imports: pg, errors.ts, messages.ts types, store-sql.ts and usage.ts (a usage record's values).
 */

export type TurnKind = "chat" | "regenerate";

export type TurnStart = {
  /** Sequence number of the user message the turn answers. */
  messageSeq: number;
  /** The stored text of the user message: what the model answers, whatever the event carried. */
  text: string;
  /** The answer variant this run writes. */
  variant: number;
  /** "skipped": the message already has its answer (a re-run), or left the current path. */
  status: "running" | "skipped";
  skipReason?: string;
  /**
   * An unfinished turn of the thread was ahead of this one when it began (threadline_begin_turn,
   * under the thread's lock): false, the turn has nothing to wait for and skips the lookup.
   */
  turnAhead: boolean;
};

/** Creates the thread, or checks that an existing one belongs to the user (seeding and tools; a turn needs no call). */
export async function ensureThread(db: pg.Pool, threadId: string, userId: string): Promise<{ created: boolean }> {
  const inserted = await db.query(sql.insertThread, [threadId, userId]).catch((error: unknown) => {
    throw isThreadDeletedError(error) ? threadDeleted(threadId) : error;
  });
  if (inserted.rowCount === 1) return { created: true };
  const owner = await db.query<sql.SelectThreadOwnerRow>(sql.selectThreadOwner, [threadId]);
  if (owner.rows[0]?.user_id !== userId) throw threadNotOwned(threadId);
  return { created: false };
}

/** Refuses a thread that does not exist or is another user's (a read, no lock). */
export async function checkOwnedThread(db: pg.Pool, threadId: string, userId: string): Promise<void> {
  const owner = await db.query<sql.SelectThreadOwnerRow>(sql.selectThreadOwner, [threadId]);
  if (owner.rowCount === 0) throw new HistoryRefusal("thread_not_found", `Thread ${threadId} does not exist.`);
  if (owner.rows[0]!.user_id !== userId) throw threadNotOwned(threadId);
}

/** A message sent to a thread that does not exist (a new thread takes its first message's id). */
const threadNotFound = (threadId: string) =>
  new HistoryRefusal("thread_not_found", `Thread ${threadId} does not exist: omit threadId to start a new thread.`);

const messageInUse = (messageId: string) =>
  new HistoryRefusal(
    "message_conflict",
    `Message id ${messageId} is already used by another message: generate a new messageId for each message.`,
  );

const messageTextDiffers = (messageId: string) =>
  new HistoryRefusal(
    "message_conflict",
    `Message ${messageId} was already sent with different text: a messageId names one message, so send a new message with a new messageId.`,
  );

/** What threadline_begin_turn and threadline_store_answer return instead of writing, as a caller's refusal. */
function refusal(code: string, { threadId, messageId }: { threadId: string; messageId: string }): HistoryRefusal {
  switch (code) {
    case "thread_not_found":
      return threadNotFound(threadId);
    case "thread_not_owned":
      return threadNotOwned(threadId);
    case "message_in_use":
      return messageInUse(messageId);
    case "message_text_differs":
      return messageTextDiffers(messageId);
    case "message_not_found":
      return new HistoryRefusal("message_not_found", `Message ${messageId} is not a message of thread ${threadId}.`);
    // An edit (threadline_begin_turn, p_context.edits) whose edited message is not there, or left the path meanwhile.
    case "edited_not_found":
      return new HistoryRefusal(
        "message_not_found",
        `Message ${messageId} edits a message that is not a user message of thread ${threadId}.`,
      );
    case "edited_not_on_path":
      return new HistoryRefusal(
        "message_not_on_path",
        `Message ${messageId} edits a message no longer on the thread's current path: switch to its branch, then edit it.`,
      );
    // A user message deleted with its branch, its event run again (threadline_begin_turn, message_tombstones).
    case "message_deleted":
      return new HistoryRefusal(
        "message_not_found",
        `Message ${messageId} was deleted with its branch of thread ${threadId}, so it is not stored again: send the words again as a new message.`,
      );
    // A message sent before its user's erasure (threadline_begin_turn, p_event_time): erased with the rest.
    case "user_erased":
      return new HistoryRefusal(
        "thread_deleted",
        `Message ${messageId} was sent before its user's data was erased, so it is not stored in thread ${threadId}: send the words again as a new message.`,
      );
    // The run's cancellation came while its first step executed, and was logged first (turns.ts cancelTurn).
    case "run_cancelled":
      return new HistoryRefusal(
        "no_running_turn",
        `The run was cancelled before it stored message ${messageId}: nothing is stored in thread ${threadId}; send the message again.`,
      );
    default:
      throw new Error(`Unknown storage refusal ${code}`);
  }
}

/**
 * Before POST /api/chat sends its event (one read): the thread must be the user's or not exist yet
 * (the turn creates it; not a deleted thread's id, which its tombstone refuses), the message id not one
 * deleted with its branch (refused the same way), and a message id already used
 * must name this very message (same thread, same text) — then the event is simply sent again and
 * the run stores nothing new. Anything else is the refusal the run itself would end with.
 * Returns the run that last refused the message (busy reject, after this check), if one did.
 */
export async function checkSendable(
  db: pg.Pool,
  input: { threadId?: string | undefined; messageId: string; userId: string; content: string },
): Promise<{ refusedRunId: string | null }> {
  const threadId = input.threadId ?? input.messageId;
  const { rows } = await db.query<sql.SelectSendableRow>(sql.selectSendable, [input.threadId ?? null, input.messageId]);
  const found = rows[0]!;
  if (found.owner === null && found.deleted) throw threadDeleted(threadId);
  if (found.owner !== null && found.owner !== input.userId) throw threadNotOwned(threadId);
  if (found.message_deleted)
    throw new HistoryRefusal(
      "message_conflict",
      `Message id ${input.messageId} was deleted with its branch of thread ${threadId}: generate a new messageId for each message.`,
    );
  if (found.message_thread_id !== null) {
    if (found.message_thread_id !== threadId || found.message_kind !== "user") throw messageInUse(input.messageId);
    if (found.message_text !== input.content) throw messageTextDiffers(input.messageId);
  }
  return { refusedRunId: found.refused_run_id };
}

/**
 * Stores the user message under the client's id (once, however often it is called) and records
 * the run as a turn on it, in one statement under the thread's lock. A new thread is created here,
 * when the message names it (its id is the first message's id) and nothing refuses. Refused,
 * writing nothing: another user's thread, an unknown thread, a message id used by another message,
 * the same message id with different text. A run that calls this again gets the same answer back.
 * Which variant the run writes is decided in threadline_begin_turn (src/history/schema/functions).
 * A new message sent with busy policy reject is refused while another turn of the thread is
 * unfinished (ThreadBusy, busy.ts), before anything is written; the refusal is then logged.
 * A chat message sent before its user's erasure (turn.eventTime) is refused, storing nothing.
 * With `history`, a turn that runs with no unfinished turn ahead also gets its history window,
 * read in the same statement after the thread's lock (what readHistoryWindow would read next).
 */
export async function beginTurn(
  db: pg.Pool,
  input: {
    threadId: string;
    userId: string;
    message: { id: string; text: string; clientTimestamp?: string | undefined };
    turn: {
      runId: string;
      kind: TurnKind;
      eventId?: string | undefined;
      busy?: BusyPolicy | undefined;
      /** When the run's event was sent (ms since the epoch, Inngest's event.ts): a message sent before its user's erasure is not stored. */
      eventTime?: number | undefined;
    };
    /** What the turn's history is made of (policy and its sources), for the debug view. */
    context?: Record<string, unknown> | undefined;
    /** The window to read (readHistoryWindow's), or none. */
    history?: { window: HistoryWindow; countUnsummarizedUpTo: number } | undefined;
  },
): Promise<TurnStart & { window?: HistoryWindowRead }> {
  const { threadId, userId, message, turn, history } = input;
  const { rows } = await db
    .query<sql.BeginTurnRow>({
      name: sql.beginTurnName,
      text: sql.beginTurn,
      values: [
        threadId,
        userId,
        message.id,
        message.text,
        message.clientTimestamp ?? null,
        turn.runId,
        turn.kind,
        turn.eventId ?? null,
        input.context ?? null,
        turn.busy ?? DEFAULT_BUSY_POLICY,
        history !== undefined,
        history ? earlierUserMessages(history.window) : null,
        history?.window.preserveSystemMessages ?? false,
        history?.countUnsummarizedUpTo ?? 0,
        turn.eventTime === undefined ? null : new Date(turn.eventTime),
      ],
    })
    // The thread was deleted (migration 0016's tombstone): its events never bring it back. Busy
    // with another turn, for a message sent with policy reject (busy.ts): refused, nothing stored,
    // the refusal logged for the streams that wait for the message's turn.
    .catch(async (error: unknown) => {
      if (isThreadDeletedError(error)) throw threadDeleted(threadId);
      const busy = threadBusyFromError(error, threadId);
      if (!busy) throw error;
      await logRefusal(db, { threadId, runId: turn.runId, messageId: message.id }, busy);
      throw busy;
    });
  const row = rows[0]!;
  if (row.refusal) throw refusal(row.refusal, { threadId, messageId: message.id });
  return {
    messageSeq: Number(row.message_seq),
    text: row.stored_text,
    variant: row.variant,
    status: row.status,
    ...(row.skip_reason ? { skipReason: row.skip_reason } : {}),
    turnAhead: row.turn_ahead === true,
    ...(row.window_rows === null
      ? {}
      : {
          window: windowRead({
            rows: row.window_rows,
            window_start: row.window_start!,
            covers_through_turn_seq: row.summary_through,
            summary_text: row.summary_text,
            summary_updated_at: row.summary_updated_at,
            unsummarized: row.unsummarized!,
          }),
        }),
  };
}

/**
 * Which rows a history read returns: the last `userMessages` user messages, the current one
 * included, and everything after each (null: all); with `preserveSystemMessages`, also the
 * system and summary rows older than that.
 */
export type HistoryWindow = { userMessages: number | null; preserveSystemMessages: boolean };

export type HistoryWindowRead = {
  rows: HistoryRow[];
  /** The thread's summary, if it has one. */
  summary: { coversThrough: number; text: string; updatedAt: string } | null;
  /** Sequence number of the user message where the window's turns begin. */
  windowStart: number;
  /** Current-path messages before the window that the summary does not cover (counting stops at the limit asked for). */
  unsummarized: number;
};

/**
 * The current path before the user message at `beforeSeq`, limited to the window, with the
 * thread's summary and how far it lags behind the window: one statement. An unknown thread reads
 * as empty; another user's thread is refused. The read does not wait for an earlier turn that is
 * still running: the turn function waits for it before reading.
 */
export async function readHistoryWindow(
  db: pg.Pool,
  input: { threadId: string; userId: string; beforeSeq: number; window: HistoryWindow; countUnsummarizedUpTo: number },
): Promise<HistoryWindowRead> {
  const { threadId, userId, beforeSeq, window } = input;
  const { rows } = await db.query<sql.SelectHistoryWindowRow>({
    name: sql.selectHistoryWindowName,
    text: sql.selectHistoryWindow,
    values: [
      threadId,
      beforeSeq,
      earlierUserMessages(window),
      window.preserveSystemMessages,
      input.countUnsummarizedUpTo,
    ],
  });
  const read = rows[0];
  if (!read) return { rows: [], summary: null, windowStart: beforeSeq, unsummarized: 0 };
  if (read.user_id !== userId) throw threadNotOwned(threadId);
  return windowRead(read);
}

/** How many user messages before the current one the window holds (null: all). */
function earlierUserMessages(window: HistoryWindow): number | null {
  return window.userMessages === null ? null : Math.max(window.userMessages - 1, 0);
}

/** A window row as read, by history.get or by the begin statement. */
function windowRead(read: Omit<sql.SelectHistoryWindowRow, "user_id">): HistoryWindowRead {
  return {
    rows: read.rows,
    summary:
      read.covers_through_turn_seq === null
        ? null
        : {
            coversThrough: Number(read.covers_through_turn_seq),
            text: read.summary_text!,
            updatedAt: read.summary_updated_at!.toISOString(),
          },
    windowStart: Number(read.window_start),
    unsummarized: read.unsummarized,
  };
}

/** The current path before the user message at `beforeSeq`, limited to the window (one statement). */
export async function readHistory(
  db: pg.Pool,
  input: { threadId: string; userId: string; beforeSeq: number; window: HistoryWindow },
): Promise<HistoryRow[]> {
  return (await readHistoryWindow(db, { ...input, countUnsummarizedUpTo: 0 })).rows;
}

/**
 * Stores a turn's answer and completes the turn, in one statement under the thread's lock
 * (threadline_store_answer in src/history/schema/functions). Result ids are derived by the caller, so
 * storing the same answer twice inserts nothing. The answer becomes the current variant of its
 * user message, unless that message left the current path while the turn ran (an earlier message
 * was regenerated): then it is stored off the path and the turn is "superseded". A turn ended
 * meanwhile by another hand (the user stopped it, it was cancelled, or its failure was recorded)
 * stays so: nothing is stored and the status is the turn's.
 */
/** How a turn ended by another hand than its run: its late answer is not stored. */
export type EndedTurnStatus = "stopped" | "cancelled" | "failed";
export type StoredAnswer = {
  inserted: number;
  status: sql.StoreAnswerRow["status"];
  /** A later turn of the thread was unfinished when the answer was stored: it may wait for this run. */
  laterUnfinished: boolean;
  /** The thread had no title yet: title-thread, started by this run's turn.finished, writes one. */
  untitled: boolean;
};

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
    /** The usage of the inference the answer came from, recorded in the same statement whatever its outcome. */
    usage?: UsageRecord | undefined;
  },
): Promise<StoredAnswer> {
  const { threadId, userId, runId, messageId, messageSeq, variant, results, usage } = input;
  const { rows } = await db.query<sql.StoreAnswerRow>({
    name: usage ? sql.storeAnswerWithUsageName : sql.storeAnswerName,
    text: usage ? sql.storeAnswerWithUsage : sql.storeAnswer,
    values: [
      threadId,
      userId,
      runId,
      messageId,
      messageSeq,
      variant,
      input.detachLaterTurns,
      JSON.stringify(results),
      input.context ?? null,
      ...(usage ? usageValues(usage) : []),
    ],
  });
  const row = rows[0]!;
  if (row.refusal) throw refusal(row.refusal, { threadId, messageId });
  return {
    inserted: row.inserted,
    status: row.status,
    laterUnfinished: row.later_unfinished === true,
    untitled: row.untitled === true,
  };
}

/** A user message of the user's thread, or the refusal that says which of those it is not. */
async function findUserMessage(
  db: pg.Pool,
  { threadId, messageId, userId }: { threadId: string; messageId: string; userId: string },
) {
  const row = (await db.query<sql.SelectThreadMessageRow>(sql.selectThreadMessage, [threadId, messageId])).rows[0];
  if (!row) throw new HistoryRefusal("thread_not_found", `Thread ${threadId} does not exist.`);
  if (row.user_id !== userId) {
    throw new HistoryRefusal(
      "thread_not_owned",
      `Thread ${threadId} belongs to another user: only its owner can regenerate or list its answers.`,
    );
  }
  if (row.id === null)
    throw new HistoryRefusal("message_not_found", `Message ${messageId} is not a message of thread ${threadId}.`);
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
export async function loadUserMessage(
  db: pg.Pool,
  input: { threadId: string; messageId: string; userId: string },
): Promise<{ text: string }> {
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
  /** Cut short by a stop: what the model had streamed when the user stopped it. */
  stopped?: true;
  createdAt: string;
  results: { id: string; agentName: string; content: unknown }[];
};

/** Every answer variant of one of the user's messages, the superseded ones included. */
export async function listAnswerVariants(
  db: pg.Pool,
  input: { threadId: string; messageId: string; userId: string },
): Promise<AnswerVariant[]> {
  await findUserMessage(db, input);
  const { rows } = await db.query<sql.SelectAnswerVariantsRow>(sql.selectAnswerVariants, [input.messageId]);
  const variants: AnswerVariant[] = [];
  for (const row of rows) {
    let variant = variants.at(-1);
    if (variant?.variant !== row.variant) {
      variant = {
        variant: row.variant,
        current: row.on_path,
        ...(row.stopped ? { stopped: true as const } : {}),
        createdAt: row.created_at.toISOString(),
        results: [],
      };
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
    db.query<sql.SelectLatestTurnRow>(sql.selectLatestTurn, [threadId]),
    db.query<sql.CountThreadMessagesRow>(sql.countThreadMessages, [threadId]),
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
