import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chatMessageEventId } from "../src/api/send-message.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { beginTurn } from "../src/history/store.js";
import { deleteThread } from "../src/history/threads.js";
import { eraseUser } from "../src/history/users.js";
import { createEventNotifier, type EventNotifier } from "../src/stream/notifier.js";
import { execute, executeFailureHandler, type SentEvent, StepFault } from "./helpers/engine.js";
import { conversation, scriptedModel, threadRows, turnsOf } from "./helpers/fixtures.js";
import { createTestApp, headersFor, listen, type Listening } from "./helpers/http.js";
import { dataLines, openEventStream } from "./helpers/sse.js";
import { within, until } from "./helpers/deadline.js";
import { tableRowCounts } from "./helpers/table-rows.js";
import { useTestBed } from "./helpers/test-bed.js";

/**
 * A run that fails before it begins a turn (its first step, history.append-user-message, failing
 * through its retries while the database is unreachable; its event refused, as message_in_use)
 * stores nothing, so no turn of the message ever exists and onFailure has no turn to mark failed.
 * Whoever follows the message must still learn that its run failed, and why: the UI message
 * stream (POST /api/ui/chat) ends with the cause, the thread's event stream carries it, and the
 * message can be sent again. Over real HTTP; the app's events are held (createTestApp records
 * them), and the test runs them as Inngest would: the run, then its onFailure.
 */

const bed = useTestBed();
const userId = "user-1";
const OUTAGE = "connect ECONNREFUSED 127.0.0.1:5432";
let events: EventNotifier;
let sent: SentEvent[];
let server: Listening;
let chatTurn: ReturnType<typeof createChatTurn>;
let regenerate: ReturnType<typeof createRegenerate>;

beforeAll(async () => {
  events = createEventNotifier(bed.db.pool);
  const test = createTestApp(bed.db.pool, { events });
  sent = test.sent;
  server = await listen(test.app.fetch);
  chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
  regenerate = createRegenerate({ db: bed.db.pool, model: scriptedModel(bed.model) });
});
afterAll(async () => {
  await events.close();
  await server.close();
});

const post = async (path: string, body: unknown) =>
  fetch(`${server.url}${path}`, { method: "POST", headers: await headersFor(userId), body: JSON.stringify(body) });

/** The run's first step cannot reach the database: it fails as a step (retriably) every time. */
const outage = async (id: string) => {
  if (id === "history.append-user-message") throw new StepFault(OUTAGE);
};

/**
 * Runs a sent event as Inngest would: the run, then, once it failed for good, its onFailure
 * handler, both given the event with the time Inngest received it (`ts`: now, unless given).
 */
async function run(event: SentEvent & { ts?: number }, beforeStep?: (id: string) => Promise<void>) {
  const received = { ...event, ts: event.ts ?? Date.now() };
  const execution = await execute(turnFunction(event), received, beforeStep ? { beforeStep } : {});
  if (execution.error !== undefined) await reportFailure(received, execution);
  return execution;
}

const turnFunction = (event: SentEvent) => (event.name === "chat/message.regenerate" ? regenerate : chatTurn);

const reportFailure = (event: SentEvent & { ts?: number }, execution: { runId: string; error: unknown }) => {
  const { name, message } = execution.error as Error;
  return executeFailureHandler(turnFunction(event), { runId: execution.runId, event, error: { name, message } });
};

/** Run `runId`'s rows of the thread's log. */
const runRows = async (threadId: string, runId: string) =>
  (
    await bed.db.pool.query<{ event: string; data: Record<string, unknown> }>(
      "SELECT event, data FROM thread_events WHERE thread_id = $1 AND run_id = $2 ORDER BY id",
      [threadId, runId],
    )
  ).rows;

const uiMessage = (messageId: string, text: string) => ({
  id: messageId,
  role: "user",
  parts: [{ type: "text", text }],
});

describe("a run that fails before it begins a turn", () => {
  it("ends useChat's stream with the cause and [DONE]; the event stream carries message.failed then stream.ended; logged once", async () => {
    const { threadId } = await conversation(chatTurn, bed.model, [["My name is Ada.", "Hello, Ada."]]);
    const watching = await openEventStream({ request: (path, init) => fetch(`${server.url}${path}`, init) }, threadId);
    const messageId = randomUUID();
    const response = await post("/api/ui/chat", {
      id: threadId,
      trigger: "submit-message",
      messages: [uiMessage(messageId, "What was my name?")],
    });
    expect(response.status).toBe(200);
    const event = sent.at(-1)!;

    const failed = await run(event, outage);
    expect(failed.error).toMatchObject({ message: OUTAGE });

    const chunks = await within(dataLines(response), "the UI message stream ends");
    expect(chunks.at(-1)).toBe("[DONE]");
    expect(chunks.slice(0, -1).map((chunk) => JSON.parse(chunk) as unknown)).toEqual([
      { type: "error", errorText: OUTAGE },
      { type: "finish", finishReason: "error", messageMetadata: { status: "failed" } },
    ]);

    await until(
      () => watching.received.some((row) => row.event === "stream.ended" && row.data.runId === failed.runId),
      "the event stream carries the failure's stream.ended",
    );
    const ending = [
      expect.objectContaining({ event: "message.failed", data: { runId: failed.runId, messageId, error: OUTAGE } }),
      expect.objectContaining({
        event: "stream.ended",
        data: { scope: "network", status: "failed", runId: failed.runId, messageId },
      }),
    ];
    expect(watching.received.filter((row) => row.data.runId === failed.runId)).toEqual(ending);
    await watching.close();

    // Reported again (onFailure's step retried): the log holds it once.
    await reportFailure(event, failed);
    expect(await runRows(threadId, failed.runId)).toEqual(ending);
    expect((await threadRows(bed.db.pool, threadId)).map((row) => row.id)).not.toContain(messageId);
    expect(await turnsOf(bed.db.pool, messageId)).toEqual([]);
  });

  it("sent again, it is a new event (the failed run's id was used) and is answered; sent once more, the same event", async () => {
    const { threadId } = await conversation(chatTurn, bed.model, [["My name is Ada.", "Hello, Ada."]]);
    const messageId = randomUUID();
    const body = { id: threadId, trigger: "submit-message", messages: [uiMessage(messageId, "What was my name?")] };
    const first = await post("/api/ui/chat", body);
    const firstEvent = sent.at(-1)!;
    expect(firstEvent.id).toBe(chatMessageEventId(userId, messageId));
    const failed = await run(firstEvent, outage);
    await within(dataLines(first), "the first UI message stream ends");

    // useChat sends it again once the database is back: its stream follows the new run.
    const again = await post("/api/ui/chat", body);
    expect(again.status).toBe(200);
    const second = sent.at(-1)!;
    expect(second.id).toBe(chatMessageEventId(userId, messageId, failed.runId));
    bed.model.script({ text: "Your name is Ada." });
    expect((await run(second)).error).toBeUndefined();
    const chunks = (await within(dataLines(again), "the second UI message stream ends")).slice(0, -1);
    expect(chunks.map((chunk) => (JSON.parse(chunk) as { type: string }).type)).not.toContain("error");
    expect(JSON.parse(chunks.at(-1)!)).toMatchObject({ type: "finish", messageMetadata: { status: "completed" } });
    expect(await turnsOf(bed.db.pool, messageId)).toMatchObject([{ status: "completed" }]);

    expect((await post("/api/chat", { threadId, messageId, content: "What was my name?" })).status).toBe(202);
    expect(sent.at(-1)!.id).toBe(second.id);
  });

  it("a regenerate whose first step failed so ends useChat's stream too", async () => {
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, [["My name is Ada.", "Hello, Ada."]]);
    const question = messageIds[0]!;
    const response = await post("/api/ui/chat", {
      id: threadId,
      trigger: "regenerate-message",
      messages: [uiMessage(question, "My name is Ada.")],
    });
    expect(response.status).toBe(200);
    const event = sent.at(-1)!;
    expect(event.name).toBe("chat/message.regenerate");
    const failed = await run(event, async (id) => {
      if (id === "history.load-message") throw new StepFault(OUTAGE);
    });
    expect(failed.error).toMatchObject({ message: OUTAGE });
    const chunks = (await within(dataLines(response), "the UI message stream ends")).slice(0, -1);
    expect(chunks.map((chunk) => JSON.parse(chunk) as unknown)).toEqual([
      { type: "error", errorText: OUTAGE },
      { type: "finish", finishReason: "error", messageMetadata: { status: "failed" } },
    ]);
    expect((await runRows(threadId, failed.runId)).map((row) => row.event)).toEqual(["message.failed", "stream.ended"]);
  });

  it("refused by its first statement (message_in_use: the id was taken meanwhile in another thread), it ends useChat's stream with the refusal", async () => {
    const { threadId } = await conversation(chatTurn, bed.model, [["My name is Ada.", "Hello, Ada."]]);
    const messageId = randomUUID();
    const response = await post("/api/ui/chat", {
      id: threadId,
      trigger: "submit-message",
      messages: [uiMessage(messageId, "What was my name?")],
    });
    expect(response.status).toBe(200);
    const event = sent.at(-1)!;
    // After the route's check, the same message id starts another thread of the user.
    await beginTurn(bed.db.pool, {
      threadId: randomUUID(),
      userId,
      message: { id: messageId, text: "What was my name?" },
      turn: { runId: `run-${randomUUID()}`, kind: "chat" },
    });

    const refused = await run(event);
    expect(refused.error).toMatchObject({ name: "NonRetriableError" });
    const chunks = (await within(dataLines(response), "the UI message stream ends")).slice(0, -1);
    expect(chunks.map((chunk) => JSON.parse(chunk) as unknown)).toEqual([
      { type: "error", errorText: expect.stringContaining(messageId) },
      { type: "finish", finishReason: "error", messageMetadata: { status: "failed" } },
    ]);
  });

  it("logs nothing on another user's thread", async () => {
    const { threadId } = await conversation(chatTurn, bed.model, [["My name is Ada.", "Hello, Ada."]]);
    const before = await bed.db.pool.query("SELECT id FROM thread_events WHERE thread_id = $1", [threadId]);
    // A raw event naming user-1's thread for user-2: refused (thread_not_owned), nothing logged there.
    const foreign = {
      name: "chat/message.sent",
      data: { threadId, messageId: randomUUID(), userId: "user-2", content: "Hi" },
    };
    expect((await run(foreign)).error).toBeDefined();
    const after = await bed.db.pool.query("SELECT id FROM thread_events WHERE thread_id = $1", [threadId]);
    expect(after.rows).toEqual(before.rows);
  });
});

describe("a new thread's first message whose run fails before it begins a turn", () => {
  it("ends useChat's stream with the cause and [DONE]; the thread then exists, empty, its log telling the failure once; sent again, it is answered", async () => {
    const threadId = randomUUID();
    const messageId = randomUUID();
    const body = { id: threadId, trigger: "submit-message", messages: [uiMessage(messageId, "My name is Ada.")] };
    const response = await post("/api/ui/chat", body);
    expect(response.status).toBe(200);
    const event = sent.at(-1)!;

    const failed = await run(event, outage);
    expect(failed.error).toMatchObject({ message: OUTAGE });

    const chunks = await within(dataLines(response), "the UI message stream ends");
    expect(chunks.at(-1)).toBe("[DONE]");
    expect(chunks.slice(0, -1).map((chunk) => JSON.parse(chunk) as unknown)).toEqual([
      { type: "error", errorText: OUTAGE },
      { type: "finish", finishReason: "error", messageMetadata: { status: "failed" } },
    ]);

    // The thread's event stream, opened afterwards, tells it from the start; the thread holds no message.
    const ending = [
      expect.objectContaining({ event: "message.failed", data: { runId: failed.runId, messageId, error: OUTAGE } }),
      expect.objectContaining({
        event: "stream.ended",
        data: { scope: "network", status: "failed", runId: failed.runId, messageId },
      }),
    ];
    const watching = await openEventStream({ request: (path, init) => fetch(`${server.url}${path}`, init) }, threadId);
    await until(() => watching.received.length >= 2, "the event stream replays the failure");
    expect(watching.received).toEqual(ending);
    await watching.close();
    expect(await threadRows(bed.db.pool, threadId)).toEqual([]);

    // Reported again (onFailure's step retried): the log holds it once.
    await reportFailure({ ...event, ts: Date.now() }, failed);
    expect(await runRows(threadId, failed.runId)).toEqual(ending);

    // useChat sends it again: a new event (the failed run's id was used), answered in the thread.
    const again = await post("/api/ui/chat", body);
    expect(again.status).toBe(200);
    const second = sent.at(-1)!;
    expect(second.id).toBe(chatMessageEventId(userId, messageId, failed.runId));
    bed.model.script({ text: "Hello, Ada." });
    expect((await run(second)).error).toBeUndefined();
    const answer = (await within(dataLines(again), "the second UI message stream ends")).slice(0, -1);
    expect(answer.map((chunk) => (JSON.parse(chunk) as { type: string }).type)).not.toContain("error");
    expect(JSON.parse(answer.at(-1)!)).toMatchObject({ type: "finish", messageMetadata: { status: "completed" } });
    expect((await threadRows(bed.db.pool, threadId)).map((row) => row.kind)).toEqual(["user", "agent"]);
  });

  it("a user erased before its run began: useChat's stream ends as its thread's deletion does; no thread is created", async () => {
    const erasedUser = `user-${randomUUID()}`;
    const threadId = randomUUID();
    const body = {
      id: threadId,
      trigger: "submit-message",
      messages: [uiMessage(randomUUID(), "Forget me.")],
    };
    const response = await fetch(`${server.url}/api/ui/chat`, {
      method: "POST",
      headers: await headersFor(erasedUser),
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(200);
    const event = { ...sent.at(-1)!, ts: Date.now() - 1_000 };
    await eraseUser(bed.db.pool, erasedUser, []);

    expect((await run(event)).error).toMatchObject({ name: "NonRetriableError" });
    const chunks = await within(dataLines(response), "the UI message stream ends");
    expect(chunks.at(-1)).toBe("[DONE]");
    expect(chunks.slice(0, -1).map((chunk) => JSON.parse(chunk) as unknown)).toContainEqual({
      type: "data-thread-deleted",
      data: { threadId },
      transient: true,
    });
    expect(await threadRows(bed.db.pool, threadId)).toEqual([]);
    const thread = await bed.db.pool.query("SELECT 1 FROM threads WHERE id = $1", [threadId]);
    expect(thread.rowCount).toBe(0);
  });

  it("creates no thread its run would not have created: a deleted thread's id, another thread's message, an edit, a user erased since", async () => {
    const { messageIds } = await conversation(chatTurn, bed.model, [
      ["Hi", "Hello."],
      ["My name is Ada.", "Hello, Ada."],
    ]);
    const { threadId: deleted } = await conversation(chatTurn, bed.model, [["Hi", "Hello."]]);
    await deleteThread(bed.db.pool, deleted, userId);
    const erasedUser = `user-${randomUUID()}`;
    const sentAt = Date.now() - 1_000;
    await eraseUser(bed.db.pool, erasedUser, []);
    const chat = (data: Record<string, unknown>) => ({
      name: "chat/message.sent",
      data: { messageId: randomUUID(), userId, content: "Hi", ...data },
    });
    const refused = [
      chat({ threadId: deleted }),
      // The message id is another thread's message (a new thread's id defaults to it too).
      chat({ threadId: randomUUID(), messageId: messageIds[1], content: "My name is Ada." }),
      chat({ messageId: messageIds[1], content: "My name is Ada." }),
      chat({ threadId: randomUUID(), edits: randomUUID() }),
      { ...chat({ userId: erasedUser, threadId: randomUUID() }), ts: sentAt },
      { ...chat({ userId: erasedUser }), ts: sentAt },
    ];
    const before = await tableRowCounts(bed.db.pool);
    for (const event of refused) expect((await run(event)).error).toMatchObject({ name: "NonRetriableError" });
    // Only the erased user's two new threads' ids are tombstoned, as the erasure's deletions are.
    expect(await tableRowCounts(bed.db.pool)).toEqual({
      ...before,
      thread_tombstones: before.thread_tombstones! + 2,
    });
  });
});
