import { randomUUID } from "node:crypto";
import { DefaultChatTransport, readUIMessageStream, type UIMessage, type UIMessageChunk } from "ai";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { chooseModel } from "../src/agents/model.js";
import { readEnvironment } from "../src/config.js";
import { chatMessageEventId } from "../src/api/send-message.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { appendEvents } from "../src/history/events.js";
import { clientMessageId } from "../src/history/ids.js";
import { beginTurn } from "../src/history/store.js";
import { cancelTurn } from "../src/history/turns.js";
import { uiChatRoutes } from "../src/api/ui-chat.js";
import { createEventNotifier, type EventNotifier } from "../src/stream/notifier.js";
import { createStreamSlots } from "../src/stream/stream-slots.js";
import { createThreadFeeds } from "../src/stream/thread-feeds.js";
import { execute, executeFailureHandler } from "./helpers/engine.js";
import { gate } from "./helpers/model-server.js";
import { scriptedModel, threadRows, turnsOf } from "./helpers/fixtures.js";
import { asUser, createTestApp, headersFor, listen, routesAs, type SentEvent } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();
let events: EventNotifier;
let app: ReturnType<typeof createTestApp>["app"];
let sent: SentEvent[];
let chatTurn: ReturnType<typeof createChatTurn>;
let regenerate: ReturnType<typeof createRegenerate>;

beforeAll(() => {
  events = createEventNotifier(bed.db.pool);
  ({ app, sent } = createTestApp(bed.db.pool, { events }));
  chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
  regenerate = createRegenerate({ db: bed.db.pool, model: scriptedModel(bed.model) });
});
afterAll(async () => {
  await events.close();
});

/** The AI SDK's own client transport, talking to the app in process. */
const transport = (userId = "user-1") =>
  new DefaultChatTransport<UIMessage>({
    api: "http://threadline.test/api/ui/chat",
    headers: () => headersFor(userId),
    fetch: ((url: string | URL | Request, init?: RequestInit) => app.request(String(url), init)) as typeof fetch,
  });

const userMessage = (text: string, id: string = randomUUID()): UIMessage => ({
  id,
  role: "user",
  parts: [{ type: "text", text }],
});

const send = (
  chatId: string,
  messages: UIMessage[],
  trigger: "submit-message" | "regenerate-message" = "submit-message",
  messageId?: string,
) => transport().sendMessages({ chatId, messages, trigger, messageId, abortSignal: undefined });

/** The AI SDK's parser folds the stream into the message useChat would show; `errors` gets each error chunk's text. */
async function finalMessage(stream: ReadableStream<UIMessageChunk>, errors: string[] = []): Promise<UIMessage> {
  let last: UIMessage | undefined;
  for await (const message of readUIMessageStream({
    stream,
    onError: (error) => errors.push((error as Error).message),
  }))
    last = message;
  if (!last) throw new Error("the stream produced no message");
  return last;
}

/** What a user reads: the text parts not marked superseded. */
const visibleText = (message: UIMessage) =>
  message.parts
    .flatMap((part) =>
      part.type === "text" && !(part.providerMetadata?.threadline as { superseded?: boolean } | undefined)?.superseded
        ? [part.text]
        : [],
    )
    .join("");

/** Every chunk of a stream, collected as it arrives (the copy given back is for the parser). */
function collect(stream: ReadableStream<UIMessageChunk>) {
  const [mine, theirs] = stream.tee();
  const chunks: UIMessageChunk[] = [];
  const done = (async () => {
    for await (const chunk of mine) chunks.push(chunk);
  })();
  return { chunks, stream: theirs, done };
}

/** Waits until `done()` holds, polling briefly, at most 5 seconds. */
async function until(done: () => boolean) {
  const deadline = Date.now() + 5_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error("condition not reached within 5 s");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Streamed-inference deltas as the in-process inference logs them: `<stepId>:delta:<n>`, tagged with the attempt. */
const writeDeltas = (threadId: string, runId: string, attempt: number, from: number, ...deltas: string[]) =>
  appendEvents(bed.db.pool, {
    threadId,
    runId,
    attempt,
    events: deltas.map((delta, i) => ({
      key: `assistant:delta:${from + i}`,
      event: "text.delta",
      data: { runId, stepId: "assistant", attempt, delta },
    })),
  });

const lastSent = () => sent.at(-1)!;

describe("POST /api/ui/chat with useChat's transport", () => {
  it("sends the last message as POST /api/chat does and streams the stored answer (gateway inference logs no deltas) under the answer's id", async () => {
    const threadId = randomUUID();
    const earlier = userMessage("An earlier message the client still holds");
    const message = userMessage("Hi");
    const stream = await send(threadId, [earlier, message]);
    expect(lastSent()).toMatchObject({
      id: chatMessageEventId("user-1", message.id),
      name: "chat/message.sent",
      data: { threadId, messageId: message.id, content: "Hi", userId: "user-1" },
    });

    bed.model.script({ text: "Hello there" });
    const [answer, run] = await Promise.all([finalMessage(stream), execute(chatTurn, lastSent())]);
    expect(run.error).toBeUndefined();
    const rows = await threadRows(bed.db.pool, threadId);
    expect(rows.map((row) => [row.kind, row.id])).toEqual([
      ["user", message.id],
      ["agent", answer.id],
    ]);
    expect(answer.role).toBe("assistant");
    expect(visibleText(answer)).toBe("Hello there");
    expect(answer.metadata).toMatchObject({
      threadId,
      userMessageId: message.id,
      runId: run.runId,
      variant: 1,
      status: "completed",
    });
    // Only the last message was sent: the model saw "Hi" once and not the client's earlier message.
    expect(JSON.stringify(bed.model.requests[0]!.messages)).not.toContain("An earlier message");
  });

  it("answers with the UI message stream headers and `data:` lines ending in [DONE]", async () => {
    const threadId = randomUUID();
    const response = await app.request("/api/ui/chat", {
      method: "POST",
      headers: await headersFor("user-1"),
      body: JSON.stringify({ id: threadId, messages: [userMessage("Hi")], trigger: "submit-message" }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(response.headers.get("x-vercel-ai-ui-message-stream")).toBe("v1");
    bed.model.script({ text: "Fine" });
    const [text] = await Promise.all([response.text(), execute(chatTurn, lastSent())]);
    const lines = text.split("\n").filter((line) => line.startsWith("data: "));
    expect(lines.at(-1)).toBe("data: [DONE]");
    expect(lines.slice(0, -1).map((line) => (JSON.parse(line.slice(6)) as { type: string }).type)).toEqual([
      "start",
      "start-step",
      "text-start",
      "text-delta",
      "text-end",
      "finish-step",
      "finish",
    ]);
  });

  it("takes useChat's own (non-UUID) message ids: the same id is the same message, so sending it again stores nothing twice and streams the same answer", async () => {
    const threadId = randomUUID();
    const message = userMessage("Hello", "Xk3aZ9pQ2mR7tLw1");
    const first = await send(threadId, [message]);
    const derived = clientMessageId(threadId, message.id);
    expect(lastSent().data.messageId).toBe(derived);
    bed.model.script({ text: "Hi!" });
    const [answer] = await Promise.all([finalMessage(first), execute(chatTurn, lastSent())]);

    // A retry of the same message (a lost response): Inngest drops the repeated event id, the stream replays the turn.
    const again = await finalMessage(await send(threadId, [message]));
    expect(lastSent().id).toBe(chatMessageEventId("user-1", derived));
    expect(again.id).toBe(answer.id);
    expect(visibleText(again)).toBe("Hi!");
    expect((await threadRows(bed.db.pool, threadId)).map((row) => row.kind)).toEqual(["user", "agent"]);
  });

  it("a message sent again after its turn's events were pruned still streams its stored answer", async () => {
    const threadId = randomUUID();
    const message = userMessage("Remember me");
    bed.model.script({ text: "Long ago" });
    const [answer] = await Promise.all([
      finalMessage(await send(threadId, [message])),
      Promise.resolve().then(() => execute(chatTurn, lastSent())),
    ]);
    await bed.db.pool.query("DELETE FROM thread_events WHERE thread_id = $1", [threadId]);
    const again = await finalMessage(await send(threadId, [message]));
    expect([again.id, visibleText(again), again.metadata]).toEqual([
      answer.id,
      "Long ago",
      expect.objectContaining({ status: "completed" }),
    ]);
  });

  it("a client that leaves before the turn starts frees its subscription", async () => {
    const subscribed = events.subscriptions;
    const leave = new AbortController();
    const stream = await transport().sendMessages({
      chatId: randomUUID(),
      messages: [userMessage("Never mind")],
      trigger: "submit-message",
      messageId: undefined,
      abortSignal: leave.signal,
    });
    expect(events.subscriptions).toBe(subscribed + 1);
    leave.abort();
    await stream.cancel().catch(() => undefined);
    await until(() => events.subscriptions === subscribed);
  });

  it("streams token deltas as they are logged; a retried step's deltas supersede its failed attempt's part, and the answer is the surviving attempt's text", async () => {
    const threadId = randomUUID();
    const { chunks, stream, done } = collect(await send(threadId, [userMessage("Tell me")]));
    const event = lastSent();
    bed.model.script({ text: "Hello world" });
    const runId = `run-${randomUUID()}`;
    const parsed = finalMessage(stream);
    const run = await execute(chatTurn, event, {
      runId,
      beforeStep: async (id) => {
        if (id !== "assistant") return;
        // Each delta reaches the client before the next is written: tokens arrive while the model answers.
        const deltaShown = (delta: string) =>
          until(() => chunks.some((chunk) => chunk.type === "text-delta" && chunk.delta === delta));
        await writeDeltas(threadId, runId, 0, 0, "Hel");
        await deltaShown("Hel");
        await writeDeltas(threadId, runId, 0, 1, "lo wo");
        await deltaShown("lo wo");
        // The first attempt failed; its retry streams the whole answer again.
        await writeDeltas(threadId, runId, 1, 0, "Hello ");
        await deltaShown("Hello ");
        await writeDeltas(threadId, runId, 1, 1, "world");
        await deltaShown("world");
      },
    });
    expect(run.error).toBeUndefined();
    const answer = await parsed;
    await done;
    expect(chunks.map((chunk) => chunk.type)).toEqual([
      "start",
      "start-step",
      "text-start",
      "text-delta",
      "text-delta",
      "text-end",
      "data-superseded",
      "text-start",
      "text-delta",
      "text-delta",
      "text-end",
      "finish-step",
      "finish",
    ]);
    expect(chunks[6]).toMatchObject({
      type: "data-superseded",
      id: "assistant:0",
      data: { partId: "assistant:0", attempt: 0, supersededBy: 1 },
    });
    const texts = answer.parts.filter((part) => part.type === "text");
    expect(texts.map((part) => [part.text, part.providerMetadata?.threadline])).toEqual([
      ["Hello wo", { stepId: "assistant", attempt: 0, superseded: true }],
      ["Hello world", { stepId: "assistant", attempt: 1 }],
    ]);
    expect(visibleText(answer)).toBe("Hello world");
    const stored = (await threadRows(bed.db.pool, threadId)).find((row) => row.kind === "agent")!;
    expect(JSON.stringify(stored.content)).toContain('"Hello world"');
  });

  it("a failed turn ends the stream with an error chunk carrying its cause", async () => {
    const unconfigured = createChatTurn({ db: bed.db.pool, model: chooseModel(readEnvironment({})) });
    const threadId = randomUUID();
    const stream = await send(threadId, [userMessage("Anyone there?")]);
    const errors: string[] = [];
    const parsed = finalMessage(stream, errors);
    const run = await execute(unconfigured, lastSent());
    expect(run.error).toBeDefined();
    await executeFailureHandler(unconfigured, {
      runId: run.runId,
      event: lastSent(),
      error: { name: "NonRetriableError", message: (run.error as Error).message },
    });
    const answer = await parsed;
    const [turn] = await turnsOf(bed.db.pool, lastSent().data.messageId as string);
    expect(turn!.status).toBe("failed");
    expect(errors).toEqual([turn!.error]);
    expect(answer.metadata).toMatchObject({ status: "failed" });
  });

  it("a cancelled turn that showed nothing ends the stream with its cause as an error (useChat adds no empty answer)", async () => {
    const threadId = randomUUID();
    const { chunks, stream, done } = collect(await send(threadId, [userMessage("Wait")]));
    const { data } = lastSent();
    const runId = `run-${randomUUID()}`;
    // The turn's first step, then Inngest's cancellation recorded by the cancellation handler.
    await beginTurn(bed.db.pool, {
      threadId,
      userId: "user-1",
      message: { id: data.messageId as string, text: "Wait" },
      turn: { runId, kind: "chat" },
    });
    await cancelTurn(bed.db.pool, runId);
    const errors: string[] = [];
    const answer = await finalMessage(stream, errors);
    await done;
    expect(chunks).toEqual([
      { type: "error", errorText: "The run was cancelled." },
      { type: "finish", finishReason: "error", messageMetadata: { status: "cancelled" } },
    ]);
    expect(errors).toEqual(["The run was cancelled."]);
    expect(answer.metadata).toMatchObject({ status: "cancelled" });
  });

  it("regenerate-message asks again for the answer it names (or, unnamed, the last one) and streams the new variant", async () => {
    const threadId = randomUUID();
    const question = userMessage("Pick a colour");
    bed.model.script({ text: "Blue" });
    const [first] = await Promise.all([
      finalMessage(await send(threadId, [question])),
      Promise.resolve().then(() => execute(chatTurn, lastSent())),
    ]);

    const named = await send(threadId, [question], "regenerate-message", first.id);
    expect(lastSent()).toMatchObject({
      name: "chat/message.regenerate",
      data: { threadId, messageId: question.id, userId: "user-1" },
    });
    bed.model.script({ text: "Green" });
    const [second] = await Promise.all([finalMessage(named), execute(regenerate, lastSent())]);
    expect(visibleText(second)).toBe("Green");
    expect(second.metadata).toMatchObject({ variant: 2, status: "completed" });
    expect(second.id).not.toBe(first.id);

    const unnamed = await send(threadId, [question], "regenerate-message");
    expect(lastSent().data).toMatchObject({ messageId: question.id });
    bed.model.script({ text: "Red" });
    const [third] = await Promise.all([finalMessage(unnamed), execute(regenerate, lastSent())]);
    expect([visibleText(third), third.metadata]).toEqual(["Red", expect.objectContaining({ variant: 3 })]);
  });

  it("refuses as POST /api/chat does: another user's thread is a 404 like an unknown one, a used message id a 409; a chat id that is not a UUID a 400; nothing is sent", async () => {
    const threadId = randomUUID();
    const question = userMessage("Mine");
    bed.model.script({ text: "Yours" });
    await Promise.all([
      finalMessage(await send(threadId, [question])),
      Promise.resolve().then(() => execute(chatTurn, lastSent())),
    ]);
    const count = sent.length;
    const post = (userId: string, body: unknown) => asUser(app, userId).post("/api/ui/chat", body);

    const intruder = await post("user-2", {
      id: threadId,
      messages: [userMessage("Let me in")],
      trigger: "submit-message",
    });
    const empty = await post("user-2", { id: randomUUID(), messages: [], trigger: "regenerate-message" });
    expect(empty.status).toBe(400);
    const regenerateOthers = await post("user-2", {
      id: threadId,
      messages: [question],
      trigger: "regenerate-message",
    });
    const regenerateUnknown = await post("user-2", {
      id: randomUUID(),
      messages: [question],
      trigger: "regenerate-message",
    });
    expect([intruder.status, regenerateOthers.status, regenerateUnknown.status]).toEqual([404, 404, 404]);
    const bodies = await Promise.all([intruder.json(), regenerateOthers.json(), regenerateUnknown.json()]);
    expect(bodies[1]).toEqual(bodies[2]);
    expect(bodies[0]).toEqual(bodies[2]);

    const reused = await post("user-1", { id: randomUUID(), messages: [question], trigger: "submit-message" });
    expect(reused.status).toBe(409);
    const notUuid = await post("user-1", { id: "chat-1", messages: [userMessage("Hi")], trigger: "submit-message" });
    expect(notUuid.status).toBe(400);
    expect(((await notUuid.json()) as { error: string }).error).toMatch(/crypto\.randomUUID\(\)/);
    const assistantLast = await post("user-1", {
      id: threadId,
      messages: [{ id: "a1", role: "assistant", parts: [{ type: "text", text: "x" }] }],
      trigger: "submit-message",
    });
    expect(assistantLast.status).toBe(400);
    expect(sent.length).toBe(count);
  });

  it("503 when the message cannot reach Inngest, as POST /api/chat; the stream's subscription is released", async () => {
    const subscribed = events.subscriptions;
    const unreachable = createTestApp(bed.db.pool, {
      events,
      sendEvent: () => Promise.reject(new Error("ECONNREFUSED")),
    }).app;
    const response = await asUser(unreachable, "user-1").post("/api/ui/chat", {
      id: randomUUID(),
      messages: [userMessage("Hi")],
      trigger: "submit-message",
    });
    expect(response.status).toBe(503);
    expect(response.headers.get("retry-after")).toBe("5");
    expect(events.subscriptions).toBe(subscribed);
  });
});

describe("a UI message stream whose database read fails", () => {
  it("ends with the documented error chunk only: no database words, and every data line a chunk useChat can parse", async () => {
    const server = await listen(app.fetch);
    const threadId = randomUUID();
    try {
      const response = await fetch(`${server.url}/api/ui/chat`, {
        method: "POST",
        headers: await headersFor("user-1"),
        body: JSON.stringify({ id: threadId, messages: [userMessage("Hi")], trigger: "submit-message" }),
      });
      expect(response.status).toBe(200);
      // The stream waits for its run (none starts here); its next read fails, as when the database does.
      await bed.db.pool.query("ALTER TABLE turns RENAME TO turns_away");
      try {
        await bed.db.pool.query("SELECT pg_notify('threadline_events', $1)", [`${threadId} 1`]);
        const text = await response.text();
        expect(text).not.toMatch(/turns_away|does not exist/);
        expect(
          text
            .split("\n\n")
            .filter((frame) => frame !== "")
            .map((frame) => JSON.parse(frame.replace(/^data: /, ""))),
        ).toEqual([
          {
            type: "error",
            errorText:
              "The stream was interrupted: resume it (GET /api/ui/chat/:threadId/stream) or reload the thread.",
          },
        ]);
      } finally {
        await bed.db.pool.query("ALTER TABLE turns_away RENAME TO turns");
      }
    } finally {
      await server.close();
    }
  });
});

describe("a UI message stream whose client stops reading", () => {
  it("is let go once its writes have waited two heartbeats, freeing its slot", async () => {
    const slots = createStreamSlots({ perUser: 1, perProcess: 10 });
    const posted: SentEvent[] = [];
    const routes = uiChatRoutes(
      {
        db: bed.db.pool,
        sendEvent: async (event) => {
          posted.push(event as SentEvent);
          return { ids: ["evt-stalled"] };
        },
        events,
        feeds: createThreadFeeds({ db: bed.db.pool, events }),
        slots,
      },
      100,
    );
    const server = await listen(routesAs("user-1", "/api/ui/chat", routes).fetch);
    onTestFinished(() => server.close());
    const threadId = randomUUID();
    const stalled = await fetch(`${server.url}/api/ui/chat`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: threadId, messages: [userMessage("Tell me everything")], trigger: "submit-message" }),
    });
    expect(stalled.status).toBe(200);
    const runId = `run-${randomUUID()}`;
    await beginTurn(bed.db.pool, {
      threadId,
      userId: "user-1",
      message: { id: posted[0]!.data.messageId as string, text: "Tell me everything" },
      turn: { runId, kind: "chat" },
    });
    // 16 MB of answer for a client that reads nothing: past what the sockets between them hold.
    const big = "z".repeat(256 * 1024);
    for (let n = 0; n < 64; n += 1) await writeDeltas(threadId, runId, 0, n, big);
    await until(() => slots.open("user-1") === 0);
    await stalled.body!.cancel().catch(() => undefined);
  });
});

describe("GET /api/ui/chat/:threadId/stream (useChat's resume)", () => {
  it("204 when nothing runs on the thread: the transport reports no stream; an unknown thread and another user's answer the same", async () => {
    const threadId = randomUUID();
    bed.model.script({ text: "Done" });
    await Promise.all([
      finalMessage(await send(threadId, [userMessage("Hi")])),
      Promise.resolve().then(() => execute(chatTurn, lastSent())),
    ]);
    expect(await transport().reconnectToStream({ chatId: threadId })).toBeNull();
    expect(await transport("user-2").reconnectToStream({ chatId: threadId })).toBeNull();
    expect(await transport().reconnectToStream({ chatId: randomUUID() })).toBeNull();
    expect((await asUser(app, "user-1").get("/api/ui/chat/not-a-uuid/stream")).status).toBe(400);
  });

  it("while a turn runs, replays it from its beginning with only the surviving attempt's text, then follows it live to its end", async () => {
    const threadId = randomUUID();
    const { chunks: firstChunks, stream: first, done } = collect(await send(threadId, [userMessage("Tell me")]));
    const firstAnswer = finalMessage(first);
    const event = lastSent();
    bed.model.script({ text: "Hello world" });
    const runId = `run-${randomUUID()}`;
    let resumed: ReturnType<typeof collect> | undefined;
    const run = await execute(chatTurn, event, {
      runId,
      beforeStep: async (id) => {
        if (id !== "assistant") return;
        await writeDeltas(threadId, runId, 0, 0, "Hel", "lo wo");
        await writeDeltas(threadId, runId, 1, 0, "Hello ");
        await until(() => firstChunks.some((chunk) => chunk.type === "text-delta" && chunk.delta === "Hello "));
        // The page is reloaded mid-answer: useChat resumes.
        const stream = await transport().reconnectToStream({ chatId: threadId });
        expect(stream).not.toBeNull();
        resumed = collect(stream!);
        await until(() => resumed!.chunks.some((chunk) => chunk.type === "text-delta"));
        await writeDeltas(threadId, runId, 1, 1, "world");
      },
    });
    expect(run.error).toBeUndefined();
    const answer = await finalMessage(resumed!.stream);
    await Promise.all([resumed!.done, done, firstAnswer]);
    expect(resumed!.chunks.map((chunk) => chunk.type)).toEqual([
      "start",
      "start-step",
      "text-start",
      "text-delta",
      "text-delta",
      "text-end",
      "finish-step",
      "finish",
    ]);
    expect(answer.parts.filter((part) => part.type === "text").map((part) => part.text)).toEqual(["Hello world"]);
    expect(answer.id).toBe((await firstAnswer).id);
    expect(answer.metadata).toMatchObject({ runId, status: "completed" });
  });
});

describe("useChat against a real streaming turn (INFERENCE=stream)", () => {
  it("text-delta chunks reach useChat's transport while the model is still answering, and the final message's text is the stored answer", async () => {
    const streamingTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model), inference: "stream" });
    const threadId = randomUUID();
    const { chunks, stream, done } = collect(await send(threadId, [userMessage("Stream to me")]));
    const parsed = finalMessage(stream);
    const held = gate();
    bed.model.script({
      text: "Tokens arrive one by one.",
      stream: { chunks: ["Tokens", " arrive", " one by one."], holdAfter: { chunks: 2, gate: held } },
    });

    const running = execute(streamingTurn, lastSent());
    await held.reached;
    // The model is held after two pieces: the client already shows them, and the turn has not ended.
    const shown = () => chunks.flatMap((chunk) => (chunk.type === "text-delta" ? [chunk.delta] : [])).join("");
    await until(() => shown() === "Tokens arrive");
    expect(chunks.map((chunk) => chunk.type)).not.toContain("finish");
    expect((await threadRows(bed.db.pool, threadId)).map((row) => row.kind)).toEqual(["user"]);

    held.release();
    const run = await running;
    expect(run.error).toBeUndefined();
    const answer = await parsed;
    await done;
    const stored = (await threadRows(bed.db.pool, threadId)).find((row) => row.kind === "agent")!;
    const storedText = (stored.content as { output: { type: string; content?: string }[] }).output.find(
      (m) => m.type === "text",
    )?.content;
    expect(storedText).toBe("Tokens arrive one by one.");
    expect(visibleText(answer)).toBe(storedText);
    expect(answer.id).toBe(stored.id);
    expect(answer.metadata).toMatchObject({ threadId, runId: run.runId, status: "completed" });
    expect(chunks.at(-1)).toMatchObject({ type: "finish", finishReason: "stop" });
  });
});

describe("useChat's edit (sendMessage with an existing user message's id)", () => {
  it("is an edit: a sibling answered with the history before it; the same edit again stores nothing; editing it again edits the branch shown", async () => {
    const threadId = randomUUID();
    const one = userMessage("One?");
    const two = userMessage("Two?");
    for (const [message, answer] of [
      [one, "1"],
      [two, "2"],
    ] as const) {
      const stream = await send(threadId, [message]);
      bed.model.script({ text: answer });
      await Promise.all([finalMessage(stream), execute(chatTurn, lastSent())]);
    }
    bed.model.reset();

    // useChat keeps the edited message's id and sends the history up to it with the new words.
    const edited = { ...two, parts: [{ type: "text" as const, text: "Two, edited?" }] };
    const stream = await send(threadId, [one, edited], "submit-message", two.id);
    const event = lastSent();
    expect(event).toMatchObject({
      name: "chat/message.sent",
      data: { threadId, edits: two.id, content: "Two, edited?" },
    });
    expect(event.data.messageId).not.toBe(two.id);
    bed.model.script({ text: "2'" });
    const [answer, run] = await Promise.all([finalMessage(stream), execute(chatTurn, event)]);
    expect(run.error).toBeUndefined();
    expect(visibleText(answer)).toBe("2'");
    expect(bed.model.requests[0]!.messages.slice(1).map((m) => m.content)).toEqual(["One?", "1", "Two, edited?"]);
    const onPath = async () =>
      (await threadRows(bed.db.pool, threadId)).filter((row) => row.on_path).map((row) => row.id);
    expect(await onPath()).toEqual([one.id, expect.any(String), event.data.messageId, answer.id]);
    const stored = (await threadRows(bed.db.pool, threadId)).length;

    // The same edit sent again: the same message, no new row.
    const again = await send(threadId, [one, edited], "submit-message", two.id);
    expect(lastSent().data.messageId).toBe(event.data.messageId);
    await again.cancel();
    expect((await threadRows(bed.db.pool, threadId)).length).toBe(stored);

    // Edited again under the same client id: the branch now shown is the one edited, a third sibling.
    const third = await send(
      threadId,
      [one, { ...two, parts: [{ type: "text", text: "Two, again?" }] }],
      "submit-message",
      two.id,
    );
    expect(lastSent().data).toMatchObject({ edits: event.data.messageId, content: "Two, again?" });
    bed.model.script({ text: "2''" });
    await Promise.all([finalMessage(third), execute(chatTurn, lastSent())]);
    expect((await threadRows(bed.db.pool, threadId)).filter((row) => row.on_path)).toHaveLength(4);
    expect(bed.model.requests[1]!.messages.slice(1).map((m) => m.content)).toEqual(["One?", "1", "Two, again?"]);
  });
});
