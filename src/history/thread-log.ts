import { z } from "zod";

/**
 * The thread event log's vocabulary, defined once: every kind of row the log holds, with its
 * payload (`data`). A wire protocol in the manner of the AI SDK's ui-message-chunks.ts: the schema
 * is the source, the types are inferred from it.
 *
 * Who writes which kinds: Threadline's TypeScript (src/stream/delta-writer.ts: text.delta of an
 * inference step; src/stream/publish.ts: AgentKit's chunks when EVENT_LOG_CHUNKS=1), its
 * statements and PL/pgSQL functions (turn endings, turn.skipped, stream.ended, turn.retrying,
 * title.changed). Who reads them: the SSE route (src/api/events.ts), the UI message
 * stream (src/stream/ui-message-stream.ts), the realtime relay and the playground. The playground's
 * JavaScript and the SQL cannot import this module: test/thread-log-parity.test.ts holds them to it.
 *
 * Rows read back are trusted, not parsed: only these writers write the log. Readers narrow a row by
 * its `event`, which types its `data`.
 */

/** A text.delta streamed by an inference step: its run, step, the step's attempt (0 first) and the text. */
const inferenceDelta = z.object({
  runId: z.string(),
  stepId: z.string(),
  attempt: z.int().min(0),
  delta: z.string(),
});
export type InferenceDelta = z.infer<typeof inferenceDelta>;

/**
 * turn.retrying: a failed attempt of a running turn that Inngest will retry (also what the
 * messages API shows as the turn's `retrying` status). `attempt`: the attempt that comes next,
 * counted from 1 (2 after the first failure); `maxAttempts`: the run's attempts in all (retries +
 * 1); `nextAttemptAt`: when, if known (ISO).
 */
export const turnRetrying = z.object({
  attempt: z.int().min(2),
  maxAttempts: z.int().min(2),
  cause: z.string(),
  nextAttemptAt: z.iso.datetime().optional(),
});
export type TurnRetrying = z.infer<typeof turnRetrying>;

/**
 * How a turn's stream ended: the turn's final status; refused: the run began no turn
 * (message.refused); failed and cancelled also end a run that failed, or was cancelled, before
 * beginning one (message.failed, message.cancelled).
 */
const streamEndStatus = z.enum(["completed", "superseded", "skipped", "stopped", "failed", "cancelled", "refused"]);
export type StreamEndStatus = z.infer<typeof streamEndStatus>;

/** A turn that ended without an answer, with the recorded cause. */
const turnEnding = z.object({ runId: z.string(), messageId: z.string(), error: z.string().nullable() });

// AgentKit 0.13.2's streaming chunks (its StreamingEvent types), as far as a network run publishes
// them into the log: the network's own run.completed, run.failed and stream.ended are not written
// (Threadline writes its ending where it records the turn). AgentKit adds threadId (and userId) to
// every payload, hence loose objects. test/thread-log.test.ts checks them against AgentKit's types.
const agentKitRunScope = z.enum(["network", "agent"]);
const agentKitPartMetadata = z.object({
  toolName: z.string().optional(),
  dataType: z.string().optional(),
  mimeType: z.string().optional(),
  agentName: z.string().optional(),
});
const agentKitDelta = z.looseObject({ partId: z.string(), messageId: z.string(), delta: z.string() });

/**
 * Who settled a tool call's approval: its owner, a stop of the turn (denied), the clock (expired),
 * or the turn's failure or cancellation (denied: threadline_turn_ended_approvals).
 */
export const approvalDecidedBy = z.enum(["user", "stop", "expiry", "turn-ended"]);
export type ApprovalDecidedBy = z.infer<typeof approvalDecidedBy>;

/** A tool call awaiting a human decision, as its tool.approval.* events carry it (docs/approvals.md). */
const toolApproval = z.object({
  approvalId: z.string(),
  runId: z.string(),
  messageId: z.string(),
  toolCallId: z.string(),
  toolName: z.string(),
  arguments: z.unknown(),
  status: z.enum(["pending", "approved", "denied", "expired"]),
  decidedBy: approvalDecidedBy.nullable(),
  reason: z.string().nullable(),
  expiresAt: z.string(),
});

const kind = <K extends string, D extends z.ZodType>(event: K, data: D, description: string) =>
  z.object({ event: z.literal(event), data }).meta({ description });

/** One row of a thread's log as its writers write it: `event` names the kind, `data` is its payload. */
export const threadLogEvent = z.discriminatedUnion("event", [
  kind(
    "text.delta",
    z.union([inferenceDelta, agentKitDelta]),
    "Streamed text: of an inference step ({runId, stepId, attempt, delta}; a later attempt of a step supersedes " +
      "what an earlier one streamed), or AgentKit's chunk ({partId, messageId, delta}).",
  ),
  kind("turn.retrying", turnRetrying, "An attempt failed; Inngest retries the turn."),
  kind("turn.failed", turnEnding, "The turn failed (stream.ended follows)."),
  kind("turn.cancelled", turnEnding, "The turn was cancelled (stream.ended follows)."),
  kind(
    "turn.stopped",
    z.object({ runId: z.string(), messageId: z.string(), variant: z.int(), answerStored: z.boolean() }),
    "The user stopped the turn; what it streamed was stored as the answer when answerStored (stream.ended follows).",
  ),
  kind(
    "turn.interrupted",
    z.object({
      runId: z.string(),
      messageId: z.string(),
      byMessageId: z.string(),
      stopped: z.boolean(),
      rolledBack: z.boolean(),
    }),
    "A message sent with busy interrupt or rollback (byMessageId) ended turn runId, logged under the interrupting run: " +
      "stopped (its turn.stopped and stream.ended came first; false: it had finished), rolledBack (its message and answers left the current path).",
  ),
  kind(
    "turn.skipped",
    z.object({ runId: z.string(), reason: z.string() }),
    "The turn answered nothing (reason says why): its message was answered meanwhile by another run, or, a " +
      "regenerate's, left the current path before its turn began. Nothing stored (stream.ended follows).",
  ),
  kind(
    "message.refused",
    z.object({
      runId: z.string(),
      messageId: z.string(),
      code: z.literal("thread_busy"),
      runningTurn: z.object({ runId: z.string(), messageId: z.string() }),
      error: z.string(),
    }),
    "Run runId refused message messageId, sent with busy reject, because a turn of the thread (runningTurn) began after " +
      "the sending route's check: nothing was stored, no turn began (stream.ended, status refused, follows). Send it " +
      "again once that turn has ended.",
  ),
  kind(
    "message.failed",
    z.object({ runId: z.string(), messageId: z.string(), error: z.string() }),
    "Run runId failed before it began a turn for message messageId: its first step failed through its retries (the " +
      "database unreachable, …) or its event was refused (the cause says which). The run stored nothing (stream.ended, " +
      "status failed, follows). Logged by the run's onFailure, only on a thread of the event's user. Send the message " +
      "again (a new event: the run is named in its id).",
  ),
  kind(
    "message.cancelled",
    z.object({ runId: z.string(), messageId: z.string(), error: z.string() }),
    "Run runId was cancelled before it began a turn for message messageId (an operator cancelled it while it was " +
      "queued, or before its first step stored the message). The run stored nothing (stream.ended, status cancelled, " +
      "follows). Logged only on a thread of the event's user. Send the message again (a new event: the run is named in " +
      "its id), unless the message is stored (a regenerate's run, a rerun's): then the cause says so, and regenerating " +
      "it answers it.",
  ),
  kind(
    "stream.ended",
    z.object({
      scope: z.literal("network"),
      status: streamEndStatus,
      runId: z.string(),
      messageId: z.string().optional(),
      variant: z.int().optional(),
    }),
    "The turn ended, written in the transaction that recorded it: a reader that sees it finds the answer or the failure stored " +
      "(refused: the run began no turn, message.refused says why; a run that failed or was cancelled before it began one " +
      "logged message.failed or message.cancelled first).",
  ),
  kind(
    "title.changed",
    z.object({ title: z.string().nullable(), titleSource: z.enum(["user", "model"]).nullable() }),
    "The thread's title changed (null: untitled).",
  ),
  kind(
    "thread.path.changed",
    z.object({ messageId: z.string(), pathVersion: z.int() }),
    "The thread's current path changed: a switch to the branch through messageId, or an edit (messageId, the new " +
      "message) that took the edited message and what followed off it. Read the thread's messages again.",
  ),
  kind(
    "run.started",
    z.looseObject({
      runId: z.string(),
      parentRunId: z.string().optional(),
      scope: agentKitRunScope,
      name: z.string(),
      messageId: z.string().optional(),
      threadId: z.string().optional(),
    }),
    "AgentKit: a network or agent run started.",
  ),
  kind(
    "run.completed",
    z.looseObject({ runId: z.string(), scope: agentKitRunScope, name: z.string(), messageId: z.string().optional() }),
    "AgentKit: an agent's run completed.",
  ),
  kind(
    "part.created",
    z.looseObject({
      partId: z.string(),
      runId: z.string(),
      messageId: z.string(),
      type: z.enum(["text", "tool-call", "tool-output", "reasoning", "data", "file", "refusal"]),
      metadata: agentKitPartMetadata.optional(),
    }),
    "AgentKit: a part of the answer (text, tool call, tool output) started.",
  ),
  kind(
    "part.completed",
    z.looseObject({
      partId: z.string(),
      runId: z.string(),
      messageId: z.string(),
      type: z.string(),
      finalContent: z.unknown(),
      metadata: agentKitPartMetadata.optional(),
    }),
    "AgentKit: a part is complete (finalContent).",
  ),
  kind(
    "tool_call.arguments.delta",
    agentKitDelta.extend({ toolName: z.string().optional() }),
    "AgentKit: a tool call's arguments (JSON text).",
  ),
  kind("tool_call.output.delta", agentKitDelta, "AgentKit: a tool's output (JSON text)."),
  kind(
    "tool.approval.requested",
    toolApproval,
    "A tool call awaits the owner's decision (POST /api/threads/{threadId}/approvals/{approvalId}); the turn waits.",
  ),
  kind(
    "tool.approval.decided",
    toolApproval,
    "The tool call was approved or denied (decidedBy user; or denied because the turn was stopped, failed or was cancelled).",
  ),
  kind("tool.approval.expired", toolApproval, "Nobody decided before expiresAt: the tool did not run."),
]);
export type ThreadLogEvent = z.infer<typeof threadLogEvent>;
export type ThreadLogKind = ThreadLogEvent["event"];
/** The payload of one kind. */
export type ThreadLogData<K extends ThreadLogKind> = Extract<ThreadLogEvent, { event: K }>["data"];

/** Every kind the log holds, in the order above. */
export const THREAD_LOG_KINDS: readonly ThreadLogKind[] = threadLogEvent.options.map(
  (option) => option.shape.event.value,
);

/**
 * The kinds a client that shows a thread live must act on: streamed text, a message refused (or
 * failed, or cancelled, before its run began a turn), a retry under way, a turn's end (every ending is followed
 * by stream.ended), a new title, a tool call awaiting the user's approval and its decision,
 * another branch shown. The rest is detail.
 */
export const CLIENT_KINDS = [
  "text.delta",
  "message.refused",
  "message.failed",
  "message.cancelled",
  "turn.retrying",
  "stream.ended",
  "title.changed",
  "tool.approval.requested",
  "tool.approval.decided",
  "tool.approval.expired",
  "thread.path.changed",
] as const satisfies readonly ThreadLogKind[];

/** Not a row of the log: how a live stream of a thread (SSE, realtime) ends when the thread is deleted. */
export const THREAD_DELETED = "thread.deleted";
export const threadDeletedEvent = z
  .object({ event: z.literal(THREAD_DELETED), data: z.object({ threadId: z.string() }) })
  .meta({ description: "Not in the log: the thread was deleted and the stream ends (no id)." });

/** The log event a stored row holds: its kind and payload as the writers wrote them (trusted, see above). */
export const loggedEvent = (row: { event: string; data: Record<string, unknown> }) =>
  ({ event: row.event, data: row.data }) as ThreadLogEvent;
