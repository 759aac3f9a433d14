import { randomUUID } from "node:crypto";
import { DefaultChatTransport, readUIMessageStream, type UIMessage } from "ai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chatMessageEventId } from "../src/api/send-message.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { editMessageId } from "../src/history/ids.js";
import { beginTurn } from "../src/history/store.js";
import { cancelTurn } from "../src/history/turns.js";
import { createEventNotifier, type EventNotifier } from "../src/stream/notifier.js";
import { execute, executeFailureHandler, type SentEvent } from "./helpers/engine.js";
import { conversation, scriptedModel, threadRows, turnsOf } from "./helpers/fixtures.js";
import { createTestApp, headersFor, listen, type Listening } from "./helpers/http.js";
import { dataLines, openEventStream } from "./helpers/sse.js";
import { within, until } from "./helpers/deadline.js";
import { useTestBed } from "./helpers/test-bed.js";

/**
 * A message sent with busy reject passes the sending route's check on an idle thread, then a turn
 * of the thread begins before the message's run does: the run's first statement refuses it and
 * stores nothing, so no turn of the message ever exists. Whoever follows the message must still
 * learn that it was refused and why, at once: the UI message stream (POST /api/ui/chat) ends with
 * the refusal, the thread's event stream carries it, and the message can be sent again. Over real
 * HTTP; the app's events are held (createTestApp records them), so the test decides when the turn
 * begins and when the message's run starts.
 */

const bed = useTestBed();
const userId = "user-1";
let events: EventNotifier;
let sent: SentEvent[];
let server: Listening;
let chatTurn: ReturnType<typeof createChatTurn>;

beforeAll(async () => {
  events = createEventNotifier(bed.db.pool);
  const test = createTestApp(bed.db.pool, { events });
  sent = test.sent;
  server = await listen(test.app.fetch);
  chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
});
afterAll(async () => {
  await events.close();
  await server.close();
});

const post = async (path: string, body: unknown) =>
  fetch(`${server.url}${path}`, { method: "POST", headers: await headersFor(userId), body: JSON.stringify(body) });

/** The race: a turn of another message of the thread begins (after the route's check, before the run). */
async function turnBegins(threadId: string) {
  const story = randomUUID();
  const storyRun = `run-${randomUUID()}`;
  await beginTurn(bed.db.pool, {
    threadId,
    userId,
    message: { id: story, text: "Tell me a long story." },
    turn: { runId: storyRun, kind: "chat" },
  });
  return { story, storyRun };
}

/** Runs a sent message's event as Inngest would: the run, then, once it failed for good, its onFailure handler. */
async function run(event: SentEvent, runId?: string) {
  const execution = await execute(chatTurn, event, runId ? { runId } : {});
  if (execution.error !== undefined) {
    const { name, message } = execution.error as Error;
    await executeFailureHandler(chatTurn, { runId: execution.runId, event, error: { name, message } });
  }
  return execution;
}

/** The message.refused and stream.ended rows of run `runId`. */
const refusalRows = async (threadId: string, runId: string) =>
  (
    await bed.db.pool.query<{ event: string; data: Record<string, unknown> }>(
      "SELECT event, data FROM thread_events WHERE thread_id = $1 AND run_id = $2 ORDER BY id",
      [threadId, runId],
    )
  ).rows;

const refusalText = (threadId: string, story: string, storyRun: string) =>
  expect.stringContaining(`Thread ${threadId} is still answering message ${story} (run ${storyRun})`);

describe("a message refused by busy reject after the route's check (a turn began in between)", () => {
  it("ends useChat's stream with an error naming the running turn and [DONE]; the event stream carries message.refused then stream.ended", async () => {
    const { threadId } = await conversation(chatTurn, bed.model, [["My name is Ada.", "Hello, Ada."]]);
    const watching = await openEventStream({ request: (path, init) => fetch(`${server.url}${path}`, init) }, threadId);
    const messageId = randomUUID();

    // The thread is idle: the route's check passes, the event is sent, the stream opens.
    const response = await post("/api/ui/chat", {
      id: threadId,
      trigger: "submit-message",
      busy: "reject",
      messages: [{ id: messageId, role: "user", parts: [{ type: "text", text: "What was it about?" }] }],
    });
    expect(response.status).toBe(200);
    const event = sent.at(-1)!;
    expect(event.data).toMatchObject({ messageId, busy: "reject" });

    const { story, storyRun } = await turnBegins(threadId);
    const refused = await run(event);
    expect(refused.error).toMatchObject({ name: "NonRetriableError" });

    const chunks = await within(dataLines(response), "the UI message stream ends");
    expect(chunks.at(-1)).toBe("[DONE]");
    expect(chunks.slice(0, -1).map((chunk) => JSON.parse(chunk) as unknown)).toEqual([
      { type: "error", errorText: refusalText(threadId, story, storyRun) },
      { type: "finish", finishReason: "error", messageMetadata: { status: "refused" } },
    ]);

    // The event stream's client learns the same: which run refused which message, and why.
    await until(
      () => watching.received.some((row) => row.event === "stream.ended" && row.data.runId === refused.runId),
      "the event stream carries the refusal's stream.ended",
    );
    expect(watching.received.filter((row) => row.data.runId === refused.runId)).toEqual([
      expect.objectContaining({
        event: "message.refused",
        data: {
          runId: refused.runId,
          messageId,
          code: "thread_busy",
          runningTurn: { runId: storyRun, messageId: story },
          error: refusalText(threadId, story, storyRun),
        },
      }),
      expect.objectContaining({
        event: "stream.ended",
        data: { scope: "network", status: "refused", runId: refused.runId, messageId },
      }),
    ]);
    await watching.close();

    // Nothing was stored: the thread's messages do not hold it, and it has no turn.
    expect((await threadRows(bed.db.pool, threadId)).map((row) => row.id)).not.toContain(messageId);
    expect(await turnsOf(bed.db.pool, messageId)).toEqual([]);
    await cancelTurn(bed.db.pool, storyRun);
  });

  it("is logged once however often the refusal is reported, and the run asking again is refused again even once the thread is idle", async () => {
    const { threadId } = await conversation(chatTurn, bed.model, [["My name is Ada.", "Hello, Ada."]]);
    const messageId = randomUUID();
    const accepted = await post("/api/chat", { threadId, messageId, content: "What was it about?", busy: "reject" });
    expect(accepted.status).toBe(202);
    const event = sent.at(-1)!;
    const { story, storyRun } = await turnBegins(threadId);
    const first = await run(event);
    expect(first.error).toBeDefined();

    // The turn it met ends; the same run executes again (a step run again) and reports again.
    await cancelTurn(bed.db.pool, storyRun);
    const again = await run(event, first.runId);
    expect(again.error).toMatchObject({ message: refusalText(threadId, story, storyRun) });
    expect((await refusalRows(threadId, first.runId)).map((row) => [row.event, row.data.status])).toEqual([
      ["message.refused", undefined],
      ["stream.ended", "refused"],
    ]);
    expect((await threadRows(bed.db.pool, threadId)).map((row) => row.id)).not.toContain(messageId);
  });

  it("sent again once the turn has ended, it is a new event (Inngest would drop the first one's id) and is answered; sent once more, the same event", async () => {
    const { threadId } = await conversation(chatTurn, bed.model, [["My name is Ada.", "Hello, Ada."]]);
    const messageId = randomUUID();
    const body = { threadId, messageId, content: "What was it about?", busy: "reject" };
    expect((await post("/api/chat", body)).status).toBe(202);
    const first = sent.at(-1)!;
    expect(first.id).toBe(chatMessageEventId(userId, messageId));
    const { storyRun } = await turnBegins(threadId);
    const refused = await run(first);
    await cancelTurn(bed.db.pool, storyRun);

    // useChat sends it again: its stream follows the new run, not the refusal.
    const response = await post("/api/ui/chat", {
      id: threadId,
      trigger: "submit-message",
      busy: "reject",
      messages: [{ id: messageId, role: "user", parts: [{ type: "text", text: "What was it about?" }] }],
    });
    expect(response.status).toBe(200);
    const second = sent.at(-1)!;
    expect(second.id).toBe(chatMessageEventId(userId, messageId, refused.runId));
    expect(second.id).not.toBe(first.id);
    bed.model.script({ text: "About a compiler." });
    expect((await run(second)).error).toBeUndefined();
    const chunks = (await within(dataLines(response), "the UI message stream ends")).slice(0, -1);
    expect(chunks.map((chunk) => (JSON.parse(chunk) as { type: string }).type)).not.toContain("error");
    expect(JSON.parse(chunks.at(-1)!)).toMatchObject({ type: "finish", messageMetadata: { status: "completed" } });
    expect(await turnsOf(bed.db.pool, messageId)).toMatchObject([{ status: "completed" }]);

    expect((await post("/api/chat", body)).status).toBe(202);
    expect(sent.at(-1)!.id).toBe(second.id);
  });

  it("useChat's edit (always busy reject) refused so ends useChat's stream with the error, and the edit stays unstored", async () => {
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, [["My name is Ada.", "Hello, Ada."]]);
    const transport = new DefaultChatTransport<UIMessage>({
      api: `${server.url}/api/ui/chat`,
      headers: () => headersFor(userId),
    });
    const edited = messageIds[0]!;
    const stream = await transport.sendMessages({
      chatId: threadId,
      messages: [{ id: edited, role: "user", parts: [{ type: "text", text: "My name is Grace." }] }],
      trigger: "submit-message",
      messageId: edited,
      abortSignal: undefined,
    });
    const edit = sent.at(-1)!;
    expect(edit.data).toMatchObject({ edits: edited, busy: "reject" });
    const { story, storyRun } = await turnBegins(threadId);
    expect((await run(edit)).error).toBeDefined();

    const errors: string[] = [];
    const shown: UIMessage[] = [];
    await within(
      (async () => {
        for await (const message of readUIMessageStream({
          stream,
          onError: (error) => errors.push((error as Error).message),
        }))
          shown.push(message);
      })(),
      "useChat's stream ends",
    );
    expect(errors).toEqual([refusalText(threadId, story, storyRun)]);
    expect(shown.at(-1)).toMatchObject({ role: "assistant", parts: [], metadata: { status: "refused" } });
    const editId = editMessageId(threadId, edited, "My name is Grace.");
    expect((await threadRows(bed.db.pool, threadId)).map((row) => row.id)).not.toContain(editId);
    await cancelTurn(bed.db.pool, storyRun);
  });
});
