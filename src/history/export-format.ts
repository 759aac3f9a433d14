import { z } from "zod";

/**
 * The subject-access export: everything Threadline stores about one user, as JSON Lines (one JSON
 * object per line, each with a `type`). Versioned: the first line names the format and its
 * version, and an importer refuses a version it does not know. docs/security.md describes it.
 *
 * Order: the `export` header; then per thread its `thread` line followed by that thread's
 * `message`, `turn`, `summary`, `agent_state`, `event`, `feedback` and `approval` lines; then the user's
 * `memory`, `api_key` and `usage` lines; last the `end` line counting every kind (without it, the
 * export was cut short). `feedback`, `approval` and `usage` lines came later within version 2: an
 * export without them counts none.
 * Imports: zod only.
 */
export const EXPORT_FORMAT = "threadline.export";
export const EXPORT_VERSION = 2;

const timestamp = z.iso.datetime({ offset: true });

export const exportHeader = z.object({
  type: z.literal("export"),
  format: z.literal(EXPORT_FORMAT),
  version: z.literal(EXPORT_VERSION),
  userId: z.string(),
  exportedAt: timestamp,
});

/** A thread as the thread API shows it. */
const exportedThread = z.object({
  type: z.literal("thread"),
  id: z.uuid(),
  title: z.string().nullable(),
  titleSource: z.enum(["user", "model"]).nullable(),
  metadata: z.record(z.string(), z.unknown()),
  messageCount: z.number().int().nonnegative(),
  lastMessageAt: timestamp.nullable(),
  lastActivityAt: timestamp,
  createdAt: timestamp,
  updatedAt: timestamp,
  latestTurnStatus: z.string().nullable(),
  /**
   * The id the thread's event log reached, pruned rows included (the next event's is higher), so a
   * stream resumed after a restore with the last id it saw misses nothing; absent from exports made
   * before it.
   */
  lastEventId: z.number().int().nonnegative().optional(),
});

/**
 * Every message of a thread in the order it was stored (`seq`), on the current path or not:
 * replaced answer variants and messages a regenerate or an edit took off the path (`onPath:
 * false`), stopped answers (`stopped: true`).
 */
const exportedMessage = z.object({
  type: z.literal("message"),
  threadId: z.uuid(),
  id: z.uuid(),
  seq: z.number().int().positive(),
  turnSeq: z.number().int().nonnegative(),
  role: z.enum(["user", "assistant", "system", "summary"]),
  agentName: z.string(),
  /** As stored: `{text}` for user, system and summary messages; AgentKit's output and tool calls for an answer. */
  content: z.unknown(),
  onPath: z.boolean(),
  createdAt: timestamp,
  clientTimestamp: timestamp.nullable(),
  /** An answer's user message, its variant (regenerates) and position in the turn. */
  answers: z.uuid().optional(),
  variant: z.number().int().optional(),
  position: z.number().int().optional(),
  stopped: z.boolean().optional(),
  /**
   * The conversation tree: the user message a user message followed and the answer variant it
   * followed (null: none yet); absent from exports made before branches, and for the thread's
   * first messages.
   */
  parentId: z.uuid().optional(),
  parentVariant: z.number().int().nullable().optional(),
});

/** A turn (one run answering a user message): its status and, when it failed, the cause. */
const exportedTurn = z.object({
  type: z.literal("turn"),
  threadId: z.uuid(),
  runId: z.string(),
  messageId: z.uuid(),
  kind: z.enum(["chat", "regenerate"]),
  variant: z.number().int(),
  status: z.string(),
  error: z.string().nullable(),
  eventId: z.string().nullable(),
  context: z.unknown(),
  startedAt: timestamp,
  finishedAt: timestamp.nullable(),
});

const exportedSummary = z.object({
  type: z.literal("summary"),
  threadId: z.uuid(),
  coversThroughTurnSeq: z.number().int(),
  text: z.string(),
  createdAt: timestamp,
  updatedAt: timestamp,
});

const exportedAgentState = z.object({
  type: z.literal("agent_state"),
  threadId: z.uuid(),
  agentName: z.string(),
  data: z.unknown(),
  updatedAt: timestamp,
});

/** A row of the thread's event log (what its live stream delivered), while retention keeps it. */
const exportedEvent = z.object({
  type: z.literal("event"),
  threadId: z.uuid(),
  id: z.number().int().positive(),
  runId: z.string().nullable(),
  attempt: z.number().int(),
  key: z.string(),
  event: z.string(),
  data: z.unknown(),
  createdAt: timestamp,
});

/** The user's rating of an answer of the thread (one per answer). */
const exportedFeedback = z.object({
  type: z.literal("feedback"),
  threadId: z.uuid(),
  answerId: z.uuid(),
  rating: z.enum(["up", "down"]),
  comment: z.string().nullable(),
  createdAt: timestamp,
  updatedAt: timestamp,
});

/**
 * A tool call of one of the thread's turns that asked for the user's approval: what it would have
 * run, and the decision (the user's, with the reason they gave, or the turn's end, or expiry).
 */
const exportedApproval = z.object({
  type: z.literal("approval"),
  threadId: z.uuid(),
  id: z.uuid(),
  runId: z.string(),
  messageId: z.uuid(),
  toolCallId: z.string(),
  toolName: z.string(),
  arguments: z.unknown(),
  status: z.enum(["pending", "approved", "denied", "expired"]),
  decidedBy: z.enum(["user", "stop", "expiry", "turn-ended"]).nullable(),
  reason: z.string().nullable(),
  requestId: z.string().nullable(),
  requestedAt: timestamp,
  expiresAt: timestamp,
  decidedAt: timestamp.nullable(),
});

/** A memory of the user: remembered (by an agent's tool or the API) or extracted from a thread. */
const exportedMemory = z.object({
  type: z.literal("memory"),
  id: z.uuid(),
  text: z.string(),
  source: z.enum(["remembered", "extracted"]),
  threadId: z.uuid().nullable(),
  createdAt: timestamp,
  updatedAt: timestamp,
});

/** An API key issued to the user: its id, name and dates (never its secret or hash). */
const exportedApiKey = z.object({
  type: z.literal("api_key"),
  id: z.string(),
  name: z.string(),
  createdAt: timestamp,
  revokedAt: timestamp.nullable(),
});

/** One model call's usage from the ledger (its thread may have been deleted since: the ledger keeps it). */
const exportedUsage = z.object({
  type: z.literal("usage"),
  key: z.string(),
  threadId: z.uuid(),
  messageId: z.uuid(),
  variant: z.number().int().nullable(),
  runId: z.string(),
  stepId: z.string(),
  attempt: z.number().int(),
  provider: z.string(),
  model: z.string(),
  inputTokens: z.number().int().nonnegative(),
  outputTokens: z.number().int().nonnegative(),
  cachedTokens: z.number().int().nonnegative().nullable(),
  reasoningTokens: z.number().int().nonnegative().nullable(),
  latencyMs: z.number().int().nullable(),
  costUsd: z.number().nullable(),
  failed: z.boolean(),
  createdAt: timestamp,
});

const exportCounts = z.object({
  threads: z.number().int(),
  messages: z.number().int(),
  turns: z.number().int(),
  summaries: z.number().int(),
  agentStates: z.number().int(),
  events: z.number().int(),
  memories: z.number().int(),
  apiKeys: z.number().int(),
  // Absent from files written before feedback was exported: those hold none.
  feedback: z.number().int().default(0),
  approvals: z.number().int().default(0),
  usageRecords: z.number().int().default(0),
});

const exportEnd = exportCounts.extend({ type: z.literal("end") });

export const exportRecord = z.discriminatedUnion("type", [
  exportHeader,
  exportedThread,
  exportedMessage,
  exportedTurn,
  exportedSummary,
  exportedAgentState,
  exportedEvent,
  exportedFeedback,
  exportedApproval,
  exportedMemory,
  exportedApiKey,
  exportedUsage,
  exportEnd,
]);

export type ExportRecord = z.infer<typeof exportRecord>;
export type ExportCounts = z.infer<typeof exportCounts>;

/** Counts before the first record: an export and an import count up from here. */
export const noCounts = (): ExportCounts => ({
  threads: 0,
  messages: 0,
  turns: 0,
  summaries: 0,
  agentStates: 0,
  events: 0,
  memories: 0,
  apiKeys: 0,
  feedback: 0,
  approvals: 0,
  usageRecords: 0,
});

/** Which count each record of a user's data adds to (the header and the end line count nothing). */
export const countOf = {
  thread: "threads",
  message: "messages",
  turn: "turns",
  summary: "summaries",
  agent_state: "agentStates",
  event: "events",
  memory: "memories",
  api_key: "apiKeys",
  feedback: "feedback",
  approval: "approvals",
  usage: "usageRecords",
} as const satisfies Record<Exclude<ExportRecord["type"], "export" | "end">, keyof ExportCounts>;
