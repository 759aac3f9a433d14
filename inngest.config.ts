import { eventType, type GetStepTools, Inngest, type StandardSchemaV1 } from "inngest";
import { z } from "zod";
import { busyPolicy } from "./src/history/busy-policy.js";
import { message } from "./src/history/messages.js";
import { historyRequest } from "./src/history/policy.js";
import { safeString } from "./src/history/safe-text.js";
import { setBounded } from "./src/platform/bounded-map.js";
import { logger } from "./src/platform/logger.js";

/**
 * The Inngest client and every event's contract. Event data is validated against these schemas
 * at the edge (the HTTP API before sending, each function before it writes anything).
 */
// The SDK logs through the app's logger too, so tests can silence its expected step errors.
// This client defines the functions (its id names them) and never talks to Inngest: the SDK reads
// the environment (INNGEST_DEV, keys, URLs) when a client is constructed, which for this one is
// whenever a module first imports it. The process sends and serves with a client built at
// start-up from the configuration (src/platform/inngest-serve.ts inngestClient).
export const inngest = new Inngest({ id: "threadline", logger, internalLogger: logger });

/** The step tools a function of this client is handed (`step`): every durable helper takes this type. */
export type StepTools = GetStepTools<typeof inngest>;

/** Longest user message accepted, in characters (UTF-16 units; about 8k tokens of English). */
export const MAX_CONTENT_LENGTH = 32_000;

/** Most prior messages a client may send as the conversation so far. */
export const MAX_CONVERSATION_MESSAGES = 200;

/**
 * Byte budget of one event, so that every accepted event stays under Inngest's event size limit
 * (256 KB on the free plan; sizes are UTF-8 bytes of the event's JSON). The worst case of a text
 * field is 6 bytes per UTF-16 unit: JSON writes a control character such as U+0001 as \u0001
 * (other BMP characters take at most 3 bytes, a surrogate pair 4 bytes for 2 units, and NUL and
 * lone surrogates are refused). So:
 * - `content`: 32,000 units × 6 = 192,000 bytes at worst;
 * - every other field but `conversation` (ids, a 200-unit userId, timestamp, history settings,
 *   keys): at most 2,000 bytes;
 * - room left for Inngest's envelope (name, id, ts, v): 6,000 bytes;
 * - `conversation`: what remains, 256,000 − 192,000 − 2,000 − 6,000 = 56,000 bytes of JSON in
 *   total, at most 32,000 for one message. Measured exactly (JSON.stringify, UTF-8), not estimated.
 */
export const INNGEST_EVENT_LIMIT_BYTES = 256_000;
const CONTENT_WORST_CASE_BYTES = MAX_CONTENT_LENGTH * 6;
const OTHER_FIELDS_BYTES = 2_000;
const ENVELOPE_BYTES = 6_000;
export const MAX_CONVERSATION_BYTES =
  INNGEST_EVENT_LIMIT_BYTES - CONTENT_WORST_CASE_BYTES - OTHER_FIELDS_BYTES - ENVELOPE_BYTES;
export const MAX_CONVERSATION_MESSAGE_BYTES = 32_000;

/** Marks the issues of data over a size limit (`issue.params`), which the HTTP edge may answer with 413. */
export const TOO_LARGE = { tooLarge: true } as const;

/** UTF-8 bytes of a value's JSON: what it weighs inside an event. */
export const jsonBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value) ?? "", "utf8");

/** The user id: scopes every read and write (1–200 characters, storable text). */
const userId = safeString({ error: "userId is required" })
  .min(1, "userId must not be empty")
  .max(200, "userId must be at most 200 characters");

/**
 * The conversation so far, kept by the client (client-authoritative and hybrid modes): AgentKit
 * messages in order, without the new message. Within the size caps above; no system messages
 * (only the operator's prompt and Threadline's own context speak with that authority); every tool
 * call must come with its result and every tool result must answer an earlier tool call, or the
 * model would refuse the request (or be told of a tool call that never happened).
 */
export const conversation = z
  .array(message)
  .max(
    MAX_CONVERSATION_MESSAGES,
    `conversation must hold at most ${MAX_CONVERSATION_MESSAGES} messages: send the recent ones`,
  )
  .superRefine((messages, ctx) => {
    let total = 0;
    const called = new Set<string>();
    for (const [index, m] of messages.entries()) {
      const bytes = jsonBytes(m);
      total += bytes;
      if (bytes > MAX_CONVERSATION_MESSAGE_BYTES) {
        ctx.addIssue({
          code: "custom",
          path: [index],
          params: TOO_LARGE,
          message: `message is ${bytes} bytes as JSON, over the ${MAX_CONVERSATION_MESSAGE_BYTES}-byte limit per conversation message: shorten it or leave it out`,
        });
      }
      if (m.type === "text" && m.role === "system") {
        ctx.addIssue({
          code: "custom",
          path: [index, "role"],
          message: "system messages are not accepted from clients: send it as a user message, or leave it out",
        });
      }
      if (m.type === "tool_call") for (const tool of m.tools) called.add(tool.id);
      if (m.type === "tool_result" && !called.has(m.tool.id)) {
        ctx.addIssue({
          code: "custom",
          path: [index, "tool", "id"],
          message: `tool_result ${m.tool.id} answers no earlier tool_call in the conversation`,
        });
      }
    }
    if (total > MAX_CONVERSATION_BYTES) {
      ctx.addIssue({
        code: "custom",
        path: [],
        params: TOO_LARGE,
        message: `conversation is ${total} bytes as JSON, over the ${MAX_CONVERSATION_BYTES}-byte limit: send only the most recent messages, or omit conversation to let the server read the thread's history`,
      });
    }
    const results = new Set(messages.flatMap((m) => (m.type === "tool_result" ? [m.tool.id] : [])));
    for (const [index, m] of messages.entries()) {
      if (m.type !== "tool_call") continue;
      for (const tool of m.tools) {
        if (!results.has(tool.id))
          ctx.addIssue({
            code: "custom",
            path: [index],
            message: `tool call ${tool.id} has no tool_result in the conversation`,
          });
      }
    }
  });

// The descriptions (.meta) document the fields in the HTTP API's OpenAPI description too.
export const chatMessageSentData = z.object({
  messageId: z
    .uuid({ error: "messageId must be a UUID generated by the client for this message" })
    .meta({ description: "Client-generated id of the user message: re-sending it never stores it twice." }),
  /** The user the thread belongs to; every read and write is scoped by it. */
  userId,
  content: safeString({ error: "content is required" })
    .refine((text) => text.trim().length > 0, "content must not be empty")
    .refine((text) => text.length <= MAX_CONTENT_LENGTH, `content must be at most ${MAX_CONTENT_LENGTH} characters`)
    .meta({ description: `The user's message (not empty, at most ${MAX_CONTENT_LENGTH} characters).` }),
  threadId: z
    .uuid({ error: "threadId must be a UUID (omit it to start a new thread)" })
    .meta({ description: "Absent: a new thread, whose id is the message's id." })
    .optional(),
  clientTimestamp: z.iso
    .datetime({ offset: true, error: "clientTimestamp must be an ISO 8601 date-time" })
    .max(64, "clientTimestamp must be at most 64 characters")
    .meta({ description: "When the client sent the message (ISO 8601); stored with it." })
    .optional(),
  history: historyRequest
    .meta({ description: "History settings for this turn; the operator's environment settings take precedence." })
    .optional(),
  edits: z
    .uuid({ error: "edits must be the UUID of the user message this one replaces" })
    .meta({
      description:
        "Present: this message edits that user message of the thread (POST …/messages/:messageId/edit): it is stored as its sibling and answered with the history before it; the edited branch stays, off the current path.",
    })
    .optional(),
  conversation: conversation
    .meta({
      description:
        "Present: the client sends the conversation so far (AgentKit messages, without the new one) and the database is not read for it.",
    })
    .optional(),
  busy: busyPolicy
    .meta({
      description:
        'What happens when a turn of the thread is still running: "enqueue" (this message is answered after it), "reject" (409 naming that turn, nothing stored), "interrupt" (that turn is stopped, keeping its partial answer, then this message is answered), "rollback" (as interrupt, and that turn\'s message and partial answer leave the current path). Absent: the operator\'s BUSY_POLICY (default "enqueue").',
    })
    .optional(),
  resentAfter: z
    .string()
    .min(1)
    .max(200, "resentAfter must be at most 200 characters")
    .meta({
      description:
        "Set by the sending routes, never by a client: the run that began no turn for this message (refused it, or failed or was cancelled before storing it). The message is sent again after it, so its idempotency key differs from that run's (chat-turn.ts).",
    })
    .optional(),
});
export type ChatMessageSent = z.infer<typeof chatMessageSentData>;

/** Events whose validation a process remembers, and the largest remembered (JSON characters): at most ~8 MB. */
const REMEMBERED_EVENTS = 1_000;
const REMEMBERED_EVENT_CHARS = 8_192;

/**
 * A trigger's schema for the turn functions. The SDK validates a run's event against it on every
 * request of the run (async mode: one per step, each replaying the run), though a run's event never
 * changes; these schemas check every string (safeString, refinements), a noticeable share of a
 * replay's CPU. So an event that passed is remembered by its data's JSON, and the run's later
 * requests find it there. Validation is a pure function of that JSON (events arrive as JSON), so
 * the answer is the same; what fails is never remembered, nor is data over REMEMBERED_EVENT_CHARS.
 */
function validatedOnce<Input extends Record<string, unknown>, Output>(
  schema: StandardSchemaV1<Input, Output>,
): StandardSchemaV1<Input, Output> {
  const passed = new Map<string, StandardSchemaV1.SuccessResult<Output>>();
  const standard = schema["~standard"];
  return {
    "~standard": {
      ...standard,
      validate: (value) => {
        const json = JSON.stringify(value);
        const known = json !== undefined && json.length <= REMEMBERED_EVENT_CHARS ? json : undefined;
        const remembered = known === undefined ? undefined : passed.get(known);
        if (remembered) return remembered;
        const result = standard.validate(value);
        const remember = (checked: StandardSchemaV1.Result<Output>) => {
          if (known === undefined || checked.issues) return checked;
          setBounded(passed, known, checked, REMEMBERED_EVENTS);
          return checked;
        };
        return result instanceof Promise ? result.then(remember) : remember(result);
      },
    },
  };
}

export const chatMessageSent = eventType("chat/message.sent", { schema: validatedOnce(chatMessageSentData) });

export const chatMessageRegenerateData = z.object({
  threadId: z.uuid({ error: "threadId must be the UUID of the thread the message belongs to" }),
  messageId: z
    .uuid({ error: "messageId must be the UUID of a user message in the thread" })
    .meta({ description: "The user message whose answer is generated again (never an assistant message's id)." }),
  userId,
  reason: safeString()
    .max(500, "reason must be at most 500 characters")
    .meta({ description: 'Why the user asked again (a UI label such as "retry"); kept in the run\'s event.' })
    .optional(),
  // The regenerate function's idempotency key.
  requestId: z
    .uuid({ error: "requestId must be a UUID generated by the client for this regenerate request" })
    .meta({
      description:
        "Client-generated id of this regenerate request: a retried request with the same id starts no second run. Absent: every request is a new one.",
    })
    .optional(),
});
export type ChatMessageRegenerate = z.infer<typeof chatMessageRegenerateData>;

export const chatMessageRegenerate = eventType("chat/message.regenerate", {
  schema: validatedOnce(chatMessageRegenerateData),
});

export const threadSummarizeRequestedData = z.object({
  threadId: z.uuid({ error: "threadId must be the UUID of the thread to summarize" }),
  userId,
  /**
   * Where the requesting turn's history window began (the sequence number of its oldest user
   * message): only turns before it are summarized, so the summary never overlaps the window.
   */
  beforeSeq: z.number({ error: "beforeSeq must be a message sequence number" }).int().positive(),
});
export type ThreadSummarizeRequested = z.infer<typeof threadSummarizeRequestedData>;

export const threadSummarizeRequested = eventType("thread/summarize.requested", {
  schema: threadSummarizeRequestedData,
});

export const memoryExtractRequestedData = z.object({
  threadId: z.uuid({ error: "threadId must be the UUID of the thread the turn belongs to" }),
  userId,
  /** The user message whose answered turn memories are proposed from. */
  messageId: z.uuid({ error: "messageId must be the UUID of a user message in the thread" }),
});
export type MemoryExtractRequested = z.infer<typeof memoryExtractRequestedData>;

/** Sent by a completed chat turn when memory extraction is on (MEMORY_EXTRACTION): see src/functions/extract-memories.ts. */
export const memoryExtractRequested = eventType("memory/extract.requested", { schema: memoryExtractRequestedData });

/**
 * A turn (chat turn or regenerate run) finished: completed, skipped, failed, cancelled or stopped.
 * Sent by the turn functions, their onFailure handler, the cancellation handler and the stop route;
 * a later turn of the thread that waits for this run (step.waitForEvent on runId) is released by it.
 */
export const turnFinishedData = z.object({
  threadId: z.uuid(),
  /** The Inngest run id of the finished turn: what a waiting turn matches on. */
  runId: z.string().min(1),
  /** The user message the turn answered. */
  messageId: z.uuid(),
  status: z.enum(["completed", "skipped", "superseded", "failed", "cancelled", "stopped"]),
});
export type TurnFinished = z.infer<typeof turnFinishedData>;

export const turnFinished = eventType("threadline/turn.finished", { schema: turnFinishedData });

/**
 * The user stopped a running turn (POST /api/threads/:threadId/stop), already recorded as stopped
 * with its partial answer: the turn functions cancel their run on it (cancelOn, matched on the
 * user message the run answers), so the model is not called again for it.
 */
export const turnStopRequestedData = z.object({
  threadId: z.uuid(),
  userId,
  /** The stopped run (for the record: cancelOn matches on messageId, which the trigger events carry). */
  runId: z.string().min(1),
  /** The user message the stopped turn answered. */
  messageId: z.uuid(),
});
export type TurnStopRequested = z.infer<typeof turnStopRequestedData>;

export const turnStopRequested = eventType("chat/turn.stop.requested", { schema: turnStopRequestedData });

/**
 * A thread and everything keyed by it were deleted (by its owner, or by retention). Sent after the
 * deletion committed, for components that keep their own data about a thread (memory, search
 * caches, analytics): on it they forget the thread. The event id is derived from the thread, so
 * a repeated announcement is one event.
 */
export const threadDeletedData = z.object({
  threadId: z.uuid(),
  userId,
  reason: z.enum(["user", "retention"]),
});
export type ThreadDeleted = z.infer<typeof threadDeletedData>;

export const threadDeleted = eventType("thread/deleted", { schema: threadDeletedData });

/**
 * A user was erased (npm run delete-user): every thread of theirs is already deleted and announced
 * (thread/deleted each). The turn functions cancel every run of the user on it, queued ones too,
 * so nothing of the erased user is written again. The event id is derived from the user.
 */
export const userDeletedData = z.object({ userId });
export type UserDeleted = z.infer<typeof userDeletedData>;

export const userDeleted = eventType("user/deleted", { schema: userDeletedData });

/** One turn's usage summed over its model calls (the ledger's turnUsage): the messages API and feedback events. */
export const turnUsageData = z.object({
  calls: z.int(),
  inputTokens: z.int(),
  outputTokens: z.int(),
  cachedTokens: z.int(),
  reasoningTokens: z.int(),
  totalTokens: z.int(),
  costUsd: z.number().nullable().meta({ description: "US dollars; null when the model has no price." }),
  model: z.string(),
});

/**
 * A user rated an answer (PUT /api/threads/:threadId/messages/:answerId/feedback), for scoring and
 * analysis downstream: sent after the rating is stored, under the id
 * `feedback-<answerId>-<version>` (feedbackEventId), so a retried request with the same rating
 * announces once and every changed rating once more. Removing a rating is not announced.
 */
export const messageFeedbackGivenData = z.object({
  threadId: z.uuid(),
  /** The rated answer (an assistant message). */
  answerId: z.uuid(),
  userId,
  rating: z.enum(["up", "down"]),
  comment: z.string().nullable(),
  /** The Inngest run that wrote the answer; null for an answer no stored turn wrote (an imported one). */
  runId: z.string().min(1).nullable(),
  /** The model that run called, as the turn recorded it; null when it recorded none. */
  model: z.object({ provider: z.string(), name: z.string() }).nullable(),
  /** The stored rating's version (the event id's last part). */
  version: z.string(),
  /** What the answer's turn used and cost, from the usage ledger; null when the provider reported none. */
  usage: turnUsageData.nullable(),
});
export type MessageFeedbackGiven = z.infer<typeof messageFeedbackGivenData>;

export const messageFeedbackGiven = eventType("message/feedback.given", { schema: messageFeedbackGivenData });

/** message/feedback.given's id: one per stored state of an answer's rating. */
export const feedbackEventId = (answerId: string, version: string) => `feedback-${answerId}-${version}`;

/**
 * A tool call's approval was decided (POST /api/threads/:threadId/approvals/:approvalId, or the UI
 * chat's approval response), already recorded: it wakes the turn waiting for it (step.waitForEvent
 * matched on approvalId), which then reads the recorded decision. The event decides nothing: sent
 * again by hand, it only makes the turn read the same record again.
 */
export const toolApprovalDecidedData = z.object({
  threadId: z.uuid(),
  approvalId: z.uuid(),
  status: z.enum(["approved", "denied", "expired"]),
});
export type ToolApprovalDecided = z.infer<typeof toolApprovalDecidedData>;

export const toolApprovalDecided = eventType("threadline/tool.approval.decided", { schema: toolApprovalDecidedData });
