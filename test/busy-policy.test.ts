import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { turnStopRequested } from "../inngest.config.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import type { BusyPolicy } from "../src/history/busy-policy.js";
import { streamedTexts } from "../src/stream/deltas.js";
import { readEventsAfter } from "../src/history/events.js";
import { cancels } from "./helpers/cancel-on.js";
import { execute, memoBefore, StepFault } from "./helpers/engine.js";
import { chatEvent, scriptedModel, threadRows, threadWithRunningTurn } from "./helpers/fixtures.js";
import { startLiveApp, type LiveApp } from "./helpers/live-app.js";
import { gate } from "./helpers/model-server.js";
import { useTestBed } from "./helpers/test-bed.js";

/**
 * Issue 20 item 5: a message sent while a turn of its thread is still streaming its answer, under
 * each busy policy. Over real HTTP against the app (INFERENCE=stream: the model's text is logged
 * as it arrives); the model holds its reply to "Tell me a long story." after "Once upon a time".
 */

const bed = useTestBed();

let app: LiveApp;
beforeAll(async () => {
  app = await startLiveApp(bed.db.pool, bed.model);
});
afterAll(() => app?.close());

const call = (target: LiveApp, userId: string, path: string, body: unknown) =>
  fetch(`${target.url}${path}`, {
    method: "POST",
    headers: { "X-Threadline-User": userId, "content-type": "application/json" },
    body: JSON.stringify(body),
  });

async function until(done: () => boolean | Promise<boolean>, what: string) {
  const deadline = Date.now() + 10_000;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`not reached within 10 s: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const turnOf = async (messageId: string) =>
  (
    await bed.db.pool.query<{ run_id: string; status: string }>(
      "SELECT run_id, status FROM turns WHERE message_id = $1 ORDER BY started_at",
      [messageId],
    )
  ).rows;

const log = async (threadId: string, runId: string) =>
  (
    await bed.db.pool.query<{ event: string; data: Record<string, unknown> }>(
      "SELECT event, data FROM thread_events WHERE thread_id = $1 AND run_id = $2 AND event <> 'text.delta' ORDER BY id",
      [threadId, runId],
    )
  ).rows;

type Shown = {
  id: string;
  role: string;
  content: { text?: string; output?: { content: string }[] };
  stopped?: boolean;
};
const currentPath = async (threadId: string, userId: string) => {
  const response = await fetch(`${app.url}/api/threads/${threadId}/messages`, {
    headers: { "X-Threadline-User": userId },
  });
  const { messages } = (await response.json()) as { messages: Shown[] };
  return messages.map((m) =>
    m.role === "user"
      ? `user: ${m.content.text}`
      : `${m.role}${m.stopped ? " (stopped)" : ""}: ${m.content.output!.map((o) => o.content).join("")}`,
  );
};

/** What the model was sent for its last call, without the system prompt. */
const lastModelCall = () =>
  bed.model.requests
    .at(-1)!
    .messages.filter((m) => m.role !== "system")
    .map((m) => `${m.role}: ${String(m.content)}`);

/**
 * A user's thread with one answered message, and a second whose answer is being streamed: the
 * model has sent "Once upon a time" (logged) and holds the rest until `release()`.
 */
async function busyThread(target: LiveApp = app) {
  const userId = `user-${randomUUID()}`;
  const threadId = randomUUID();
  bed.model.script({ text: "Hello, Ada." });
  expect((await call(target, userId, "/api/chat", { messageId: threadId, content: "My name is Ada." })).status).toBe(
    202,
  );
  await until(async () => (await turnOf(threadId))[0]?.status === "completed", "the first answer is stored");

  const held = gate();
  bed.model.script({
    text: "Once upon a time there was a compiler.",
    stream: { chunks: ["Once upon", " a time", " there was", " a compiler."], holdAfter: { chunks: 2, gate: held } },
  });
  const story = randomUUID();
  const sent = await call(target, userId, "/api/chat", {
    threadId,
    messageId: story,
    content: "Tell me a long story.",
  });
  expect(sent.status).toBe(202);
  await held.reached;
  const [running] = await turnOf(story);
  await until(
    async () =>
      streamedTexts(await readEventsAfter(bed.db.pool, threadId, 0, 1_000), running!.run_id)[0]?.text ===
      "Once upon a time",
    "the story's first words are logged",
  );
  return { userId, threadId, story, storyRunId: running!.run_id, release: held.release };
}

const send = (userId: string, threadId: string, content: string, busy: BusyPolicy, messageId = randomUUID()) =>
  call(app, userId, "/api/chat", { threadId, messageId, content, busy }).then(async (response) => ({
    messageId,
    status: response.status,
    body: (await response.json()) as Record<string, unknown>,
  }));

const runOf = (messageId: string) => app.runs.find((run) => run.event.data.messageId === messageId);

describe("a message sent while a turn streams its answer", () => {
  it("enqueue (the default): accepted at once, answered after the running turn completes, with its whole answer in the history", async () => {
    const { userId, threadId, story, storyRunId, release } = await busyThread();
    bed.model.script({ text: "It was about a compiler." });
    const next = await send(userId, threadId, "What was it about?", "enqueue");
    expect(next).toMatchObject({ status: 202, body: { threadId, messageId: next.messageId } });
    await until(async () => (await turnOf(next.messageId))[0]?.status === "running", "the new turn waits");
    // Still waiting: the model was not called for it.
    expect(bed.model.requests).toHaveLength(2);

    release();
    await runOf(next.messageId)!.execution;
    expect((await turnOf(story))[0]).toEqual({ run_id: storyRunId, status: "completed" });
    expect(await currentPath(threadId, userId)).toEqual([
      "user: My name is Ada.",
      "assistant: Hello, Ada.",
      "user: Tell me a long story.",
      "assistant: Once upon a time there was a compiler.",
      "user: What was it about?",
      "assistant: It was about a compiler.",
    ]);
    expect(lastModelCall().slice(-2)).toEqual([
      "assistant: Once upon a time there was a compiler.",
      "user: What was it about?",
    ]);
    expect((await log(threadId, storyRunId)).map((row) => row.event)).toEqual(["stream.ended"]);
  });

  it("reject: 409 naming the running turn, nothing stored or sent; the running turn goes on undisturbed", async () => {
    const { userId, threadId, story, storyRunId, release } = await busyThread();
    const runsBefore = app.runs.length;
    const rejected = await send(userId, threadId, "What was it about?", "reject");
    expect(rejected.status).toBe(409);
    expect(rejected.body).toEqual({
      code: "thread_busy",
      error: expect.stringContaining(`Thread ${threadId} is still answering message ${story} (run ${storyRunId})`),
      runningTurn: { runId: storyRunId, messageId: story },
    });
    // useChat's route refuses it the same way, before streaming anything.
    const viaUi = await call(app, userId, "/api/ui/chat", {
      id: threadId,
      trigger: "submit-message",
      busy: "reject",
      messages: [{ id: randomUUID(), role: "user", parts: [{ type: "text", text: "What was it about?" }] }],
    });
    expect(viaUi.status).toBe(409);
    expect(await viaUi.json()).toMatchObject({ code: "thread_busy", runningTurn: { runId: storyRunId } });

    expect(app.runs).toHaveLength(runsBefore);
    expect((await threadRows(bed.db.pool, threadId)).map((row) => row.id)).not.toContain(rejected.messageId);

    release();
    await runOf(story)!.execution;
    expect(await currentPath(threadId, userId)).toEqual([
      "user: My name is Ada.",
      "assistant: Hello, Ada.",
      "user: Tell me a long story.",
      "assistant: Once upon a time there was a compiler.",
    ]);
    // Once the thread is free, the same message is accepted.
    bed.model.script({ text: "It was about a compiler." });
    const again = await send(userId, threadId, "What was it about?", "reject", rejected.messageId);
    expect(again.status).toBe(202);
    await runOf(again.messageId)!.execution;
    expect((await turnOf(again.messageId))[0]?.status).toBe("completed");
  });

  it("reject as the raw event (or a turn that started after the route's check): the turn's first statement refuses it, non-retriably, storing nothing", async () => {
    const { userId, threadId, story, storyRunId, release } = await busyThread();
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
    const event = chatEvent({ userId, threadId, content: "What was it about?" });
    const run = await execute(chatTurn, { ...event, data: { ...event.data, busy: "reject" } }).finally(release);
    expect(run.error).toMatchObject({
      name: "NonRetriableError",
      message: expect.stringContaining(`is still answering message ${story} (run ${storyRunId})`),
    });
    expect(run.stepIds).toEqual(["generate-network-id", "history.append-user-message"]);
    expect((await threadRows(bed.db.pool, threadId)).map((row) => row.id)).not.toContain(event.data.messageId);
    expect(await turnOf(event.data.messageId)).toEqual([]);
    // No turn began: the log says so, for whoever follows the message.
    expect((await log(threadId, run.runId)).map((row) => [row.event, row.data.status ?? row.data.runningTurn])).toEqual(
      [
        ["message.refused", { runId: storyRunId, messageId: story }],
        ["stream.ended", "refused"],
      ],
    );
    await runOf(story)!.execution;
    expect(bed.model.requests).toHaveLength(2);
  });

  it("BUSY_POLICY=reject is the default of a request that names none; a request's own policy beats it", async () => {
    const rejecting = await startLiveApp(bed.db.pool, bed.model, { busyPolicy: "reject" });
    try {
      const { userId, threadId, storyRunId, release } = await busyThread(rejecting);
      const refused = await call(rejecting, userId, "/api/chat", { threadId, messageId: randomUUID(), content: "Hm?" });
      expect(refused.status).toBe(409);
      expect(await refused.json()).toMatchObject({ code: "thread_busy", runningTurn: { runId: storyRunId } });
      const queued = await call(rejecting, userId, "/api/chat", {
        threadId,
        messageId: randomUUID(),
        content: "Hm?",
        busy: "enqueue",
      });
      expect(queued.status).toBe(202);
      bed.model.script({ text: "Yes?" });
      release();
      await Promise.all(rejecting.runs.map((run) => run.execution));
      expect(rejecting.runs.at(-1)!.event.data.busy).toBe("enqueue");
    } finally {
      await rejecting.close();
    }
  });

  it("interrupt: the running turn is stopped keeping its partial answer, then the new message is answered with it in the history", async () => {
    const { userId, threadId, story, storyRunId, release } = await busyThread();
    bed.model.script({ text: "It was about a compiler." });
    const next = await send(userId, threadId, "What was it about?", "interrupt");
    expect(next.status).toBe(202);
    const nextRun = runOf(next.messageId)!;
    const { result, error, sentEvents } = await nextRun.execution;
    expect(error).toBeUndefined();
    expect(result).toMatchObject({ status: "completed", answer: "It was about a compiler." });

    expect((await turnOf(story))[0]).toEqual({ run_id: storyRunId, status: "stopped" });
    expect(await currentPath(threadId, userId)).toEqual([
      "user: My name is Ada.",
      "assistant: Hello, Ada.",
      "user: Tell me a long story.",
      "assistant (stopped): Once upon a time",
      "user: What was it about?",
      "assistant: It was about a compiler.",
    ]);
    expect(lastModelCall().slice(-3)).toEqual([
      "user: Tell me a long story.",
      "assistant: Once upon a time",
      "user: What was it about?",
    ]);
    // The log: the story ends as a user's stop ends it; the new run says which turn it interrupted.
    expect((await log(threadId, storyRunId)).map((row) => [row.event, row.data.status ?? null])).toEqual([
      ["turn.stopped", null],
      ["stream.ended", "stopped"],
    ]);
    expect((await log(threadId, nextRun.runId)).map((row) => row.event)).toEqual(["turn.interrupted", "stream.ended"]);
    expect((await log(threadId, nextRun.runId))[0]!.data).toEqual({
      runId: storyRunId,
      messageId: story,
      byMessageId: next.messageId,
      stopped: true,
      rolledBack: false,
    });
    // The stop route's events: the story's run is cancelled (cancelOn), a turn waiting for it released.
    const stopRequest = sentEvents.find((event) => event.name === turnStopRequested.name)!;
    expect(stopRequest).toMatchObject({ id: `turn-stop-${storyRunId}`, data: { runId: storyRunId, messageId: story } });
    const storyEvent = app.runs.find((run) => run.runId === storyRunId)!.event;
    expect(cancels(createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) }), storyEvent, stopRequest)).toBe(
      true,
    );
    expect(sentEvents).toContainEqual(
      expect.objectContaining({
        id: `turn-finished-${storyRunId}`,
        data: expect.objectContaining({ status: "stopped" }),
      }),
    );

    // The model's held text reaches a stopped turn: nothing more is logged or stored for it.
    release();
    await runOf(story)!.execution;
    expect((await log(threadId, storyRunId)).map((row) => row.event)).toEqual(["turn.stopped", "stream.ended"]);
    expect((await currentPath(threadId, userId))[3]).toBe("assistant (stopped): Once upon a time");
  });

  it("rollback (useChat's route): the running turn is stopped, its message and partial answer leave the current path, and the model never sees them", async () => {
    const { userId, threadId, story, storyRunId, release } = await busyThread();
    const pathVersion = async () =>
      (await bed.db.pool.query<{ v: string }>("SELECT path_version AS v FROM threads WHERE id = $1", [threadId]))
        .rows[0]!.v;
    const before = await pathVersion();
    bed.model.script({ text: "Your name is Ada." });
    const messageId = randomUUID();
    const response = await call(app, userId, "/api/ui/chat", {
      id: threadId,
      trigger: "submit-message",
      busy: "rollback",
      messages: [{ id: messageId, role: "user", parts: [{ type: "text", text: "Never mind: what is my name?" }] }],
    });
    expect(response.status).toBe(200);
    const chunks = (await response.text())
      .split("\n")
      .filter((line) => line.startsWith("data: ") && line !== "data: [DONE]")
      .map((line) => JSON.parse(line.slice(6)) as { type: string; delta?: string });
    expect(
      chunks
        .filter((c) => c.type === "text-delta")
        .map((c) => c.delta)
        .join(""),
    ).toBe("Your name is Ada.");
    expect(chunks.at(-1)).toMatchObject({ type: "finish" });

    expect(lastModelCall()).toEqual([
      "user: My name is Ada.",
      "assistant: Hello, Ada.",
      "user: Never mind: what is my name?",
    ]);
    expect(await currentPath(threadId, userId)).toEqual([
      "user: My name is Ada.",
      "assistant: Hello, Ada.",
      "user: Never mind: what is my name?",
      "assistant: Your name is Ada.",
    ]);
    // Kept, off the path: the rolled-back message and what the model had streamed for it.
    const offPath = (await threadRows(bed.db.pool, threadId)).filter((row) => !row.on_path);
    expect(offPath.map((row) => [row.id === story ? "story" : row.answers === story ? "partial" : row.id])).toEqual([
      ["story"],
      ["partial"],
    ]);
    expect(BigInt(await pathVersion())).toBeGreaterThan(BigInt(before));
    expect((await turnOf(story))[0]).toEqual({ run_id: storyRunId, status: "stopped" });
    const nextRun = runOf(messageId)!;
    expect((await log(threadId, nextRun.runId))[0]).toEqual({
      event: "turn.interrupted",
      data: { runId: storyRunId, messageId: story, byMessageId: messageId, stopped: true, rolledBack: true },
    });

    release();
    await runOf(story)!.execution;
    expect((await currentPath(threadId, userId)).length).toBe(4);
  });

  it("rollback with another message queued behind the running turn: both turns are stopped and leave the path; their runs are cancelled; the model is called for the new message alone", async () => {
    const { userId, threadId, story, storyRunId, release } = await busyThread();
    const queued = await send(userId, threadId, "And a poem.", "enqueue");
    await until(async () => (await turnOf(queued.messageId))[0]?.status === "running", "the queued turn waits");
    bed.model.script({ text: "Your name is Ada." });
    const next = await send(userId, threadId, "Forget those: what is my name?", "rollback");
    const run = await runOf(next.messageId)!.execution.finally(release);
    expect(run.result).toMatchObject({ status: "completed", answer: "Your name is Ada." });

    expect(lastModelCall()).toEqual([
      "user: My name is Ada.",
      "assistant: Hello, Ada.",
      "user: Forget those: what is my name?",
    ]);
    expect(await currentPath(threadId, userId)).toEqual([
      "user: My name is Ada.",
      "assistant: Hello, Ada.",
      "user: Forget those: what is my name?",
      "assistant: Your name is Ada.",
    ]);
    expect((await turnOf(story))[0]!.status).toBe("stopped");
    expect((await turnOf(queued.messageId))[0]!.status).toBe("stopped");
    const interrupted = (await log(threadId, runOf(next.messageId)!.runId)).filter(
      (row) => row.event === "turn.interrupted",
    );
    expect(interrupted.map((row) => [row.data.messageId, row.data.rolledBack])).toEqual([
      [story, true],
      [queued.messageId, true],
    ]);
    // Both runs were cancelled by the stop events the new turn sent; neither called the model again.
    const queuedRun = runOf(queued.messageId)!;
    await Promise.all([runOf(story)!.execution, queuedRun.execution]);
    expect([app.runs.find((r) => r.runId === storyRunId)!.cancelled, queuedRun.cancelled]).toEqual([true, true]);
    expect(bed.model.requests).toHaveLength(3);
  });

  it("interrupt of a regenerate: its partial answer becomes the current variant, and the interrupting message stays on the path", async () => {
    const userId = `user-${randomUUID()}`;
    const threadId = randomUUID();
    bed.model.script({ text: "Hello, Ada." });
    expect((await call(app, userId, "/api/chat", { messageId: threadId, content: "My name is Ada." })).status).toBe(
      202,
    );
    await runOf(threadId)!.execution;
    const held = gate();
    bed.model.script({
      text: "Hi there, Ada, how are you?",
      stream: { chunks: ["Hi there,", " Ada,", " how are you?"], holdAfter: { chunks: 2, gate: held } },
    });
    const regenerated = await call(app, userId, `/api/threads/${threadId}/messages/${threadId}/regenerate`, {});
    expect(regenerated.status).toBe(202);
    await held.reached;
    const regenerateRun = app.runs.at(-1)!;
    await until(
      async () =>
        streamedTexts(await readEventsAfter(bed.db.pool, threadId, 0, 1_000), regenerateRun.runId)[0]?.text ===
        "Hi there, Ada,",
      "the regenerated answer's first words are logged",
    );
    bed.model.script({ text: "Your name is Ada." });
    const next = await send(userId, threadId, "What is my name?", "interrupt");
    expect(next.status).toBe(202);
    const run = await runOf(next.messageId)!.execution.finally(held.release);
    expect(run.result).toMatchObject({ status: "completed", answer: "Your name is Ada." });
    expect(lastModelCall()).toEqual(["user: My name is Ada.", "assistant: Hi there, Ada,", "user: What is my name?"]);
    await regenerateRun.execution;
    expect(await currentPath(threadId, userId)).toEqual([
      "user: My name is Ada.",
      "assistant (stopped): Hi there, Ada,",
      "user: What is my name?",
      "assistant: Your name is Ada.",
    ]);
  });

  it("a retried interrupt step whose statement had committed answers the same, so the stop is still announced", async () => {
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
    const { threadId, event: earlier } = await threadWithRunningTurn(bed.db.pool, chatTurn, bed.model, "A story?");
    const event = chatEvent({ threadId, content: "Never mind." });
    const next = { ...event, data: { ...event.data, busy: "rollback" } };
    // The run is cut off after its interrupt: as if the step's result was lost after its statement committed.
    const cutOff = async (id: string) => {
      if (id === "history.find-earlier-turn") throw new StepFault("cut off");
    };
    const first = await execute(chatTurn, next, { beforeStep: cutOff });
    const retried = await execute(chatTurn, next, {
      memo: memoBefore(first, "history.interrupt-turns"),
      runId: first.runId,
      beforeStep: cutOff,
    });
    for (const run of [first, retried])
      expect(run.sentEvents.map((e) => [e.name, e.data.messageId])).toEqual([
        [turnStopRequested.name, earlier.data.messageId],
        ["threadline/turn.finished", earlier.data.messageId],
      ]);
    const logged = await bed.db.pool.query(
      "SELECT count(*)::int AS n FROM thread_events WHERE run_id = $1 AND event = 'turn.interrupted'",
      [first.runId],
    );
    expect(logged.rows[0]).toEqual({ n: 1 });
  });

  it("interrupt or rollback with nothing running: answered as enqueue would, with no lookup (its stored message found nothing ahead)", async () => {
    const userId = `user-${randomUUID()}`;
    const threadId = randomUUID();
    bed.model.script({ text: "Hello." }, { text: "Still here." });
    expect((await call(app, userId, "/api/chat", { messageId: threadId, content: "Hi." })).status).toBe(202);
    await runOf(threadId)!.execution;
    const next = await send(userId, threadId, "Are you there?", "rollback");
    const run = await runOf(next.messageId)!.execution;
    expect(run.result).toMatchObject({ status: "completed", answer: "Still here." });
    expect(run.stepIds.slice(0, 3)).toEqual([
      "generate-network-id",
      "history.append-user-message",
      "generate-agent-ids-0",
    ]);
    expect(await currentPath(threadId, userId)).toEqual([
      "user: Hi.",
      "assistant: Hello.",
      "user: Are you there?",
      "assistant: Still here.",
    ]);
  });
});
