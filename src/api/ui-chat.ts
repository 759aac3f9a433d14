import type { HttpBindings } from "@hono/node-server";
import type { Context } from "hono";
import { Hono } from "hono";
import { describeRoute, resolver } from "hono-openapi";
import { streamSSE, type SSEStreamingApi } from "hono/streaming";
import { z } from "zod";
import { chatMessageSentData } from "../../inngest.config.js";
import { callerId, userIdNotAccepted, type AuthEnv } from "../auth/identity.js";
import { busyPolicy } from "../history/busy-policy.js";
import { type Approval, decisionEventId } from "../history/approvals.js";
import { HistoryRefusal } from "../history/errors.js";
import { currentSibling } from "../history/branches.js";
import { clientMessageId, editMessageId } from "../history/ids.js";
import { agentContent, assistantTexts } from "../history/messages.js";
import { checkOwnedThread, listAnswerVariants } from "../history/store.js";
import { isDeletedThread } from "../history/threads.js";
import {
  answeredMessage,
  heldWords,
  messageTurns,
  readRunEventsAfter,
  runningTurn,
  type TurnRun,
} from "../history/turn-runs.js";
import { logger } from "../platform/logger.js";
import { followThread, type ThreadFollower } from "../stream/follow.js";
import {
  threadDeletedChunks,
  UiMessageStream,
  type FollowedRun,
  type StoredAnswer,
  type UiMessageChunk,
} from "../stream/ui-message-stream.js";
import { recordDecision } from "./approvals.js";
import type { ApiDeps, StreamDeps } from "./deps.js";
import { badRequest } from "./errors.js";
import { EVENT_PAGE_SIZE, HEAD_HEADERS, HEARTBEAT_MS, takeStreamSlot } from "./events.js";
import { apiErrors } from "./openapi.js";
import { sendChatMessage, sendEdit, sendRegenerate } from "./send-message.js";
import { validate } from "./validate.js";

/** The answer, as documented: the AI SDK's UI message stream (protocol v1) over Server-Sent Events. */
const uiMessageStream = z
  .string()
  .meta({ description: "Server-Sent Events: `data: <UI message chunk JSON>` lines, then `data: [DONE]`." });

const UI_STREAM_HEADER = "x-vercel-ai-ui-message-stream";

const clientId = z.string().min(1, "must not be empty").max(200, "must be at most 200 characters");

/** A useChat message: only its id, role and text parts are read (the last one, and only when sending). */
const uiMessage = z.looseObject({
  id: clientId,
  role: z.enum(["system", "user", "assistant"]),
  parts: z.array(z.looseObject({ type: z.string() })),
});

/** A tool part the client answered with addToolApprovalResponse (the AI SDK's needsApproval flow). */
const approvalResponse = z.looseObject({
  state: z.literal("approval-responded"),
  approval: z.object({
    id: z.uuid(),
    approved: z.boolean(),
    reason: z.string().max(500).optional(),
  }),
});

/** The approval responses of a message's tool parts. */
const approvalResponses = (parts: readonly Record<string, unknown>[]) =>
  parts.flatMap((part) => {
    const parsed = approvalResponse.safeParse(part);
    return parsed.success ? [parsed.data.approval] : [];
  });

/** What useChat's DefaultChatTransport sends. */
const uiChatBody = z.looseObject({
  id: z
    .uuid({
      error:
        "id must be the thread's UUID: give useChat an id from crypto.randomUUID() (a new thread) or an existing thread's id",
    })
    .meta({ description: "The chat's id: the thread's id (a new thread is created by its first message)." }),
  messages: z
    .array(uiMessage)
    .min(1, "messages must hold at least the message to send")
    .meta({ description: "useChat's messages; only the last one is read (it may send just that one)." }),
  trigger: z.enum(["submit-message", "regenerate-message"], {
    error: 'trigger must be "submit-message" or "regenerate-message"',
  }),
  messageId: clientId.optional().meta({
    description:
      "regenerate-message: the answer (or user message) to answer again; absent: the thread's last user message. A last message that is a user message the thread never stored (its run refused, failed or was cancelled before storing it), or an edit of one it never stored (other words than the message in its place), is sent as submit-message sends it. submit-message (useChat's edit): the user message the last message edits (a new branch; the old one stays).",
  }),
  busy: busyPolicy.optional().meta({
    description:
      "submit-message: what happens when a turn of the thread is still running, as POST /api/chat's `busy` (useChat: the transport's `body`).",
  }),
  userId: userIdNotAccepted,
});

const threadParams = z.object({ threadId: z.uuid({ error: "threadId must be a UUID" }) });

const streamAnswer = (description: string) => ({
  description,
  headers: {
    [UI_STREAM_HEADER]: {
      description: "v1: the AI SDK's UI message stream protocol.",
      required: true,
      schema: { type: "string" as const },
    },
  },
  content: { "text/event-stream": { schema: resolver(uiMessageStream) } },
});

const streamDescription =
  "`data: {json}` lines, each a UI message chunk: `start` (the answer's id, with the thread, user message, run and variant as metadata), " +
  "then per inference step `start-step`, `text-start`, `text-delta`…, `text-end`, `finish-step`; `finish` (metadata: the turn's status), " +
  "preceded by `error` (a failed turn, with its cause) or `abort` (a cancelled one); then `data: [DONE]`. `start` comes with the " +
  "answer's first part (or its end): a turn that failed or was cancelled before any part streams only `error` (the cause) and " +
  "`finish` (status failed or cancelled), and one stopped before any part only `finish` (no metadata), so useChat shows no " +
  "empty answer the thread does not hold. A message sent with " +
  "busy reject that a turn begun after the route's check refused stores nothing: its stream is only `error` (the running turn " +
  "it met) and `finish` (status refused); so is one whose run failed before storing it (`error` with the cause, `finish` status " +
  "failed), or cancelled before storing it (`error` with the cause, `finish` status cancelled). " +
  "A retried inference step supersedes " +
  "its failed attempt's text: that part ends with providerMetadata.threadline.superseded = true, a `data-superseded` part names it, and the " +
  "retry streams as a new part. A tool call awaiting the owner's approval is `tool-input-available` then `tool-approval-request` " +
  "(approvalId), and the stream ends (`finish`, reason tool-calls, status awaiting_approval): send the assistant message with the " +
  "tool part `approval-responded` (useChat's addToolApprovalResponse) as submit-message to record the decision and stream the rest; " +
  "an approved call's output is `tool-output-available` (`tool-output-error` for a tool that threw) once the turn stored it. " +
  "Comment lines are heartbeats.";

/** A user message's id: the client's when it is a UUID, else one derived from it (useChat's default ids are not UUIDs). */
const userMessageId = (threadId: string, id: string) =>
  z.uuid().safeParse(id).success ? id : clientMessageId(threadId, id);

/**
 * POST /api/ui/chat (useChat's DefaultChatTransport) and GET /api/ui/chat/:threadId/stream (its
 * resume). Sending checks and sends exactly as POST /api/chat or the regenerate route do, then
 * answers with the turn's run as a UI message stream, read from the thread's event log.
 */
export function uiChatRoutes(deps: ApiDeps & StreamDeps, heartbeatMs = HEARTBEAT_MS) {
  const { db, events, slots } = deps;
  return new Hono<AuthEnv>()
    .post(
      "/",
      describeRoute({
        operationId: "sendUiChatMessage",
        tags: ["Chat"],
        summary:
          "Send useChat's last message (or regenerate an answer) and stream the answer (AI SDK UI message stream v1)",
        description: `submit-message sends the last message (a user message; its text parts joined) as POST /api/chat does; regenerate-message asks again as the regenerate route does. ${streamDescription}`,
        responses: {
          200: streamAnswer("The turn's answer as a UI message stream, until the turn ends."),
          ...apiErrors(400, 404, 409, 413, 415, 422, 429),
        },
      }),
      validate("json", uiChatBody),
      async (c) => {
        const body = c.req.valid("json");
        const userId = callerId(c);
        const threadId = body.id;
        if (body.trigger === "submit-message") return submit(c, body, body.messageId);
        // useChat's regenerate() after a message (or an edit) its run never stored (refused, or
        // failed or cancelled before its turn): the thread holds no answer of those words to redo, so
        // they are sent again, as submit-message sent them.
        const lastSent = body.messages.at(-1)!;
        if (lastSent.role === "user" && (body.messageId === undefined || body.messageId === lastSent.id)) {
          const held = await heldWords(db, threadId, userMessageId(threadId, lastSent.id), textOf(lastSent));
          if (held === "nothing") return submit(c, body, undefined);
          if (held === "not-the-edit") return submit(c, body, lastSent.id);
        }
        await checkOwnedThread(db, threadId, userId);
        const answered = await answeredMessage(
          db,
          threadId,
          body.messageId === undefined ? undefined : userMessageId(threadId, body.messageId),
        );
        if (!answered) {
          throw new HistoryRefusal(
            "message_not_found",
            body.messageId === undefined
              ? `Thread ${threadId} has no message to answer again: send one first.`
              : `Message ${body.messageId} is not a message of thread ${threadId}.`,
          );
        }
        return streamTurn(c, threadId, answered, "regenerate", () =>
          sendRegenerate(deps, { threadId, messageId: answered, userId }),
        );
      },
    )
    .get(
      "/:threadId/stream",
      describeRoute({
        operationId: "resumeUiChatStream",
        tags: ["Chat"],
        summary:
          "Resume useChat's stream: the running turn's answer from its beginning, then live; 204 when nothing runs",
        description:
          `The thread's running turn, replayed from the event log and then followed live, as POST /api/ui/chat streams it. ${streamDescription} ` +
          "204 when no turn of the caller runs on the thread (an unknown thread and another user's thread answer the same 204, so a new chat can resume on mount).",
        responses: {
          200: streamAnswer("The running turn's answer as a UI message stream."),
          204: { description: "No turn runs on the thread." },
          ...apiErrors(400, 429),
        },
      }),
      validate("param", threadParams),
      async (c) => {
        const { threadId } = c.req.valid("param");
        const found = await runningTurn(db, threadId);
        const running = found?.ownerId === callerId(c) ? found.running : null;
        if (!running) return c.body(null, 204);
        // HEAD: hono would drop the stream's body unread, and the stream would hold its slot for good.
        if (c.req.method === "HEAD") return c.body(null, 200, { ...HEAD_HEADERS, [UI_STREAM_HEADER]: "v1" });
        const slot = takeStreamSlot(slots, callerId(c));
        // Subscribed before the first read of the run's events: nothing written meanwhile is missed.
        const follower = await followThread(events, threadId).catch((error: unknown) => {
          slot.release();
          throw error;
        });
        const run: FollowedRun = {
          threadId,
          runId: running.runId,
          userMessageId: running.messageId,
          variant: running.variant,
        };
        return respond(c, follower, slot, threadId, () => Promise.resolve(run));
      },
    );

  /** Sends useChat's last message and streams its answer; `edited`: the user message it edits. */
  async function submit(c: Context<AuthEnv>, body: z.infer<typeof uiChatBody>, edited: string | undefined) {
    const userId = callerId(c);
    const threadId = body.id;
    const last = body.messages.length - 1;
    const message = body.messages[last]!;
    const refused = (field: string, text: string) =>
      badRequest(c, { issues: [{ path: ["messages", last, field], message: text }] });
    // addToolApprovalResponse: the answer the client holds, with its decisions, goes on.
    const responses = message.role === "assistant" ? approvalResponses(message.parts) : [];
    if (responses.length > 0) return continueAfterApprovals(c, threadId, responses);
    if (message.role !== "user") return refused("role", "the last message must be the user's message to send");
    if (message.parts.some((part) => part.type !== "text"))
      return refused("parts", "only text parts can be sent (files and other parts are not accepted)");
    const content = textOf(message);
    const parsed = chatMessageSentData.safeParse({
      messageId: userMessageId(threadId, message.id),
      content,
      threadId,
      userId,
      ...(body.busy === undefined ? {} : { busy: body.busy }),
    });
    if (!parsed.success)
      return badRequest(c, {
        issues: parsed.error.issues.map((issue) => ({ ...issue, path: ["messages", last, "parts"] })),
      });
    const data = parsed.data;
    // useChat's edit (sendMessage with an existing user message's id): the new words under that
    // id, so the edit's own id is derived from both (the same edit sent again is the same
    // message); the edited message is the one on the path in that place (useChat keeps the id
    // through earlier edits of it).
    if (edited !== undefined) {
      const named = userMessageId(threadId, edited);
      const edits = await currentSibling(db, threadId, named);
      const edit = { ...data, threadId, messageId: editMessageId(threadId, named, data.content), edits };
      return streamTurn(c, threadId, edit.messageId, "submit", () => sendEdit(deps, edit));
    }
    return streamTurn(c, threadId, data.messageId, "submit", () => sendChatMessage(deps, data));
  }

  /**
   * Subscribes, notes the message's runs so far, sends, then streams the run the send started (a
   * message sent before, submitted again, streams its latest run: Inngest drops the repeated event).
   */
  async function streamTurn(
    c: Context<AuthEnv>,
    threadId: string,
    messageId: string,
    kind: "submit" | "regenerate",
    send: () => Promise<unknown>,
  ) {
    // The slot first: a refused stream sends nothing.
    const slot = takeStreamSlot(slots, callerId(c));
    let follower: ThreadFollower | undefined;
    let known: TurnRun[];
    try {
      follower = await followThread(events, threadId);
      known = await messageTurns(db, threadId, messageId);
      await send();
    } catch (error) {
      follower?.stop();
      slot.release();
      throw error;
    }
    const toRun = (turn: TurnRun): FollowedRun => ({
      threadId,
      runId: turn.runId,
      userMessageId: messageId,
      variant: turn.variant,
      ...(turn.begun ? {} : { begun: false as const }),
      ...(turn.status === "running"
        ? {}
        : { ended: { status: turn.status, ...(turn.error === null ? {} : { cause: turn.error }) } }),
    });
    // A run that began no turn (refused the message, or failed or was cancelled before storing it) is no run of it
    // to stream again: a message sent again after it streams the run that sending starts.
    const earlier = kind === "submit" ? known.filter((turn) => turn.begun).at(-1) : undefined;
    return respond(c, follower, slot, threadId, async () => {
      if (earlier) return toRun(earlier);
      const started = (await messageTurns(db, threadId, messageId)).find(
        (turn) => !known.some((k) => k.runId === turn.runId),
      );
      return started && toRun(started);
    });
  }

  /**
   * Records the client's approval responses (as POST /api/threads/:threadId/approvals/:approvalId
   * does; one it sent before answers the same), then streams the turn from after the decisions:
   * the client appends it to the answer it shows.
   */
  async function continueAfterApprovals(
    c: Context<AuthEnv>,
    threadId: string,
    responses: { id: string; approved: boolean; reason?: string | undefined }[],
  ) {
    const userId = callerId(c);
    const slot = takeStreamSlot(slots, userId);
    let follower: ThreadFollower | undefined;
    try {
      follower = await followThread(events, threadId);
      let approval: Approval | undefined;
      const denied: string[] = [];
      const approved: string[] = [];
      for (const response of responses) {
        const answer = await recordDecision(deps, {
          threadId,
          userId,
          approvalId: response.id,
          decision: response.approved ? "approve" : "deny",
          reason: response.reason,
          sameDecisionIsRetry: true,
        });
        if (answer.status !== 200) {
          follower.stop();
          slot.release();
          return answer.status === 404 ? c.json(answer.body, 404) : c.json(answer.body, 409);
        }
        approval = answer.body.approval;
        (approval.status === "approved" ? approved : denied).push(approval.toolCallId);
      }
      const { runId, messageId } = approval!;
      const from = await decisionEventId(
        db,
        threadId,
        responses.map((response) => response.id),
      );
      const turn = (await messageTurns(db, threadId, messageId)).find((t) => t.runId === runId);
      const run: FollowedRun = {
        threadId,
        runId,
        userMessageId: messageId,
        variant: turn?.variant ?? 0,
        deniedToolCalls: denied,
        approvedToolCalls: approved,
        ...(turn && turn.status !== "running"
          ? { ended: { status: turn.status, ...(turn.error === null ? {} : { cause: turn.error }) } }
          : {}),
      };
      return respond(c, follower, slot, threadId, () => Promise.resolve(run), from);
    } catch (error) {
      follower?.stop();
      slot.release();
      throw error;
    }
  }

  /**
   * The UI message stream of the run `findRun` names (undefined: not started yet, asked again on
   * the next wake-up). Its reads are scoped by the caller; once the run was found, a thread that is
   * no longer the caller's was deleted: the stream ends with a data-thread-deleted part.
   */
  function respond(
    c: Context<AuthEnv>,
    follower: ThreadFollower,
    slot: { release: () => void },
    threadId: string,
    findRun: () => Promise<FollowedRun | undefined>,
    from = 0,
  ) {
    c.header(UI_STREAM_HEADER, "v1");
    const ownerId = callerId(c);
    // Served by @hono/node-server: its response, to cut when the client stops reading.
    const outgoing = (c.env as Partial<HttpBindings> | undefined)?.outgoing;
    return streamSSE(c, async (stream) => {
      let translator: UiMessageStream | undefined;
      let last = from;
      // A client that stops reading blocks every write, heartbeats too, and the stream keeps its
      // slot for good: a socket full for two heartbeats without draining once is cut (the client
      // resumes). A slow client drains now and then, and keeps its stream.
      let full = 0;
      const drained = () => {
        full = 0;
      };
      outgoing?.on("drain", drained);
      const stalled = setInterval(() => {
        full = outgoing?.writableNeedDrain ? full + 1 : 0;
        if (full >= 2) outgoing?.destroy();
      }, heartbeatMs);
      stalled.unref();
      try {
        await follower.follow(stream, heartbeatMs, async () => {
          if (!translator) {
            const run = await findRun();
            // Not started yet, or never will be: its thread was deleted meanwhile (or before).
            if (!run && (await isDeletedThread(db, threadId))) return endDeleted(stream, threadId);
            if (!run) return false;
            translator = new UiMessageStream(run);
            await write(stream, translator.start());
          }
          const rows = [];
          for (;;) {
            const page = await readRunEventsAfter(db, {
              threadId,
              ownerId,
              runId: translator.run.runId,
              afterId: last,
              limit: EVENT_PAGE_SIZE,
            });
            if (!page.present) return endDeleted(stream, threadId);
            rows.push(...page.events);
            last = page.events.at(-1)?.id ?? last;
            if (page.events.length < EVENT_PAGE_SIZE) break;
          }
          await write(stream, translator.push(rows));
          if (translator.awaitingApproval) {
            await write(stream, translator.pauseForApproval());
            await stream.writeSSE({ data: "[DONE]" });
            return true;
          }
          if (!translator.ending) return false;
          const stored = translator.needsStoredAnswer ? await storedAnswer(translator.run, callerId(c)) : undefined;
          await write(stream, translator.finish(stored));
          await stream.writeSSE({ data: "[DONE]" });
          return true;
        });
      } catch (error) {
        // Headers are sent: the client is told, and resumes with GET /api/ui/chat/:threadId/stream.
        // Caught here, not by streamSSE's onError, after which hono sends the error's own message
        // as an event too: the database's words, and a data line useChat cannot parse.
        logger.error({ err: error, threadId }, "UI message stream failed");
        await write(stream, [
          {
            type: "error",
            errorText:
              "The stream was interrupted: resume it (GET /api/ui/chat/:threadId/stream) or reload the thread.",
          },
        ]);
      } finally {
        clearInterval(stalled);
        outgoing?.off("drain", drained);
        slot.release();
      }
    });
  }

  /** The answer the run stored (or found, skipped): its texts, one per stored result, and its tool calls' outputs. */
  async function storedAnswer(run: FollowedRun, userId: string): Promise<StoredAnswer> {
    const variants = await listAnswerVariants(db, { threadId: run.threadId, messageId: run.userMessageId, userId });
    const results = variants.find((variant) => variant.variant === run.variant)?.results ?? [];
    return {
      texts: results.map((result) => assistantTexts(result.content).join("")),
      toolOutputs: new Map(results.flatMap((result) => toolOutputs(result.content))),
    };
  }
}

/** A stored result's tool outputs by tool call id: AgentKit's `{data}`, or `{error}` for a tool that threw. */
const toolOutputs = (content: unknown) =>
  agentContent.parse(content).toolCalls.map(({ tool, content: result }) => {
    const { data, error } = (result ?? {}) as { data?: unknown; error?: { message?: unknown } };
    const output =
      error === undefined
        ? { output: data ?? result }
        : { errorText: typeof error.message === "string" ? error.message : JSON.stringify(error) };
    return [tool.id, output] as const;
  });

/** A useChat message's words: its text parts, joined. */
const textOf = (message: z.infer<typeof uiMessage>) =>
  message.parts.map((part) => (typeof part.text === "string" ? part.text : "")).join("");

/** Ends a UI stream whose thread was deleted; true: the stream is complete. */
async function endDeleted(stream: SSEStreamingApi, threadId: string): Promise<true> {
  await write(stream, threadDeletedChunks(threadId));
  await stream.writeSSE({ data: "[DONE]" });
  return true;
}

async function write(stream: SSEStreamingApi, chunks: readonly UiMessageChunk[]) {
  for (const chunk of chunks) await stream.writeSSE({ data: JSON.stringify(chunk) });
}
