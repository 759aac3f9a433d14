import { randomUUID } from "node:crypto";
import { InngestExecutionEngine } from "inngest/internals";
import { beforeAll, describe, expect, it } from "vitest";
import * as events from "../inngest.config.js";
import { createChatTurn, type FunctionDeps } from "../src/functions/chat-turn.js";
import { createFunctions } from "../src/functions/index.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { createSummarizeThread } from "../src/functions/summarize-thread.js";
import { ensureThread } from "../src/history/store.js";
import { storeModelTitle } from "../src/history/titles.js";
import { NO_MEMORY } from "../src/memory/components.js";
import { memoryIdFor } from "../src/history/memories.js";
import { execute, type Execution, type ExecuteOptions, type WaitResolver } from "./helpers/engine.js";
import { chatEvent, scriptedModel, threadWithRunningTurn } from "./helpers/fixtures.js";
import { storeAnsweredTurn } from "./helpers/seed.js";
import { useTestBed } from "./helpers/test-bed.js";

/**
 * Step ids are Inngest's memo keys: a run in flight finds its finished steps by them after a
 * deploy. This file freezes, for each kind of turn, the ordered ids a run executes (step.run,
 * step.ai.infer, step.sendEvent, step.waitForEvent), and the function ids and event names the
 * app serves. A change to any of them fails here; update the tables only on purpose, knowing
 * that runs in flight under the old ids re-execute those steps (docs/architecture.md).
 */

const bed = useTestBed();

type TestEvent = Parameters<typeof execute>[1];

const hashId = (id: string) => InngestExecutionEngine._internals.hashId(id);

/**
 * The one place run-specific parts of step ids are normalized: each concrete value a run puts
 * into a step id is replaced by a named placeholder, so the rest of the id stays pinned. The run
 * id becomes <runId>; the event's user message and thread ids <messageId> and <threadId>;
 * AgentKit's per-agent message ids (the memoized result of its `generate-agent-ids-<k>` step,
 * used in its `generate-…-part-id-<id>` steps) <agentMessage.k>; a test names any other (a
 * memory's hash).
 */
function normalized(run: Execution, event: TestEvent, placeholders: Record<string, string>): string[] {
  const pairs: [string, string][] = [[run.runId, "<runId>"], ...Object.entries(placeholders)];
  for (const field of ["messageId", "threadId"]) {
    const value = event.data[field];
    if (typeof value === "string") pairs.push([value, `<${field}>`]);
  }
  for (const [k, id] of run.memoIds.filter((id) => id.startsWith("generate-agent-ids-")).entries()) {
    const ids = run.memo.find((step) => step.id === hashId(id))!.handler() as { agentMessageId: string };
    pairs.push([ids.agentMessageId, `<agentMessage.${k}>`]);
  }
  return run.memoIds.map((id) => pairs.reduce((text, [value, placeholder]) => text.replaceAll(value, placeholder), id));
}

/**
 * The recorded ids are Inngest's memo keys (a repeated id's k-th repeat is `<id>:<k>`): the run's
 * memo must hold exactly their hashes, so no step hides from the golden lists.
 */
function expectMemoMatches(run: Execution) {
  expect(run.memo.map((step) => step.id).sort()).toEqual(run.memoIds.map(hashId).sort());
}

/** Runs `fn` for `event`, expects success, and returns the normalized step ids. */
async function stepsOf(
  fn: Parameters<typeof execute>[0],
  event: TestEvent,
  placeholders: Record<string, string> = {},
  options: ExecuteOptions = {},
) {
  const run = await execute(fn, event, options);
  expect(run.error).toBeUndefined();
  expectMemoMatches(run);
  return { run, steps: normalized(run, event, placeholders) };
}

const deps = (extra: Partial<FunctionDeps> = {}): FunctionDeps => ({
  db: bed.db.pool,
  model: scriptedModel(bed.model),
  ...extra,
});

let chatTurn: ReturnType<typeof createChatTurn>;
let regenerate: ReturnType<typeof createRegenerate>;

beforeAll(() => {
  chatTurn = createChatTurn(deps());
  regenerate = createRegenerate(deps());
});

describe("golden step ids of each turn kind", () => {
  it("a new thread", async () => {
    bed.model.script({ text: "Hello." });
    const event = chatEvent({ userId: `user-${randomUUID()}`, content: "Hi" });
    const { run, steps } = await stepsOf(chatTurn, event);
    // The inference is a step.ai.infer: the Inngest server calls the model (INFERENCE=gateway).
    expect(run.aiInferSteps).toEqual(["assistant"]);
    expect(steps).toEqual([
      "generate-network-id",
      "history.append-user-message",
      "generate-agent-ids-0",
      "assistant",
      // A final answer's usage is recorded by history.append-results: no usage.assistant step.
      "history.append-results",
      "turn.finished",
    ]);
  });

  it("an existing thread, not titled yet (its turn.finished asks for a title)", async () => {
    const userId = `user-${randomUUID()}`;
    bed.model.script({ text: "Hello, Ada." }, { text: "Your name is Ada." });
    const first = chatEvent({ userId, content: "My name is Ada." });
    await stepsOf(chatTurn, first);
    const second = chatEvent({ userId, threadId: first.data.messageId, content: "What is my name?" });
    const { steps } = await stepsOf(chatTurn, second);
    // No turn was ahead as the message was stored: no history.find-earlier-turn, and the history
    // window came with the message (no history.get).
    expect(steps).toEqual([
      "generate-network-id",
      "history.append-user-message",
      "generate-agent-ids-0",
      "assistant",
      "history.append-results",
      "turn.finished",
    ]);
  });

  it("an existing titled thread with no later message (the common turn): no lookup, no turn.finished", async () => {
    const userId = `user-${randomUUID()}`;
    bed.model.script({ text: "Hello, Ada." }, { text: "Your name is Ada." });
    const first = chatEvent({ userId, content: "My name is Ada." });
    await stepsOf(chatTurn, first);
    await storeModelTitle(bed.db.pool, first.data.messageId, "Ada's name");
    const second = chatEvent({ userId, threadId: first.data.messageId, content: "What is my name?" });
    const { steps } = await stepsOf(chatTurn, second);
    expect(steps).toEqual([
      "generate-network-id",
      "history.append-user-message",
      "generate-agent-ids-0",
      "assistant",
      "history.append-results",
    ]);
  });

  it("an existing thread whose earlier turn is still running (the turn waits for it)", async () => {
    const {
      threadId,
      event: earlier,
      attempt,
    } = await threadWithRunningTurn(bed.db.pool, chatTurn, bed.model, "I like compilers.");
    bed.model.script({ text: "Compilers are great." }, { text: "You like compilers." });
    const next = chatEvent({ threadId, content: "What do I like?" });
    // The wait ends when the earlier turn, retried meanwhile, announces its finish.
    const waits: WaitResolver = async (wait) => {
      const finished = await execute(chatTurn, earlier, { memo: attempt.memo, runId: attempt.runId, attempt: 1 });
      return finished.sentEvents.find((e) => e.name === wait.event) ?? null;
    };
    const { steps } = await stepsOf(chatTurn, next, {}, { waits });
    expect(steps).toEqual([
      "generate-network-id",
      "history.append-user-message",
      "history.find-earlier-turn",
      "history.wait-for-turn",
      "history.find-earlier-turn.2",
      "history.get",
      "generate-agent-ids-0",
      "assistant",
      "history.append-results",
      "turn.finished",
    ]);
  });

  it("an existing thread whose earlier turn is still running, sent with busy interrupt or rollback (it stops that turn, then goes on without waiting)", async () => {
    for (const busy of ["interrupt", "rollback"]) {
      const { threadId } = await threadWithRunningTurn(bed.db.pool, chatTurn, bed.model, "I like compilers.");
      bed.model.script({ text: "Noted." });
      const next = chatEvent({ threadId, content: "Never mind." });
      const { steps } = await stepsOf(chatTurn, { ...next, data: { ...next.data, busy } });
      expect(steps).toEqual([
        "generate-network-id",
        "history.append-user-message",
        "history.find-turns-to-interrupt",
        "history.interrupt-turns",
        "history.announce-interrupted",
        "history.find-earlier-turn",
        "history.get",
        "generate-agent-ids-0",
        "assistant",
        "history.append-results",
        "turn.finished",
      ]);
    }
  });

  it("a regenerate", async () => {
    const userId = `user-${randomUUID()}`;
    bed.model.script({ text: "First answer." }, { text: "Second answer." });
    const first = chatEvent({ userId, content: "Tell me something." });
    await stepsOf(chatTurn, first);
    const threadId = first.data.messageId;
    const { steps } = await stepsOf(regenerate, {
      name: "chat/message.regenerate",
      data: { userId, threadId, messageId: threadId },
    });
    expect(steps).toEqual([
      "history.load-message",
      "generate-network-id",
      "history.append-user-message",
      "generate-agent-ids-0",
      "assistant",
      "history.append-results",
      "turn.finished",
    ]);
  });

  it("an edit (a chat turn naming the message it edits): the existing thread's steps", async () => {
    const userId = `user-${randomUUID()}`;
    bed.model.script({ text: "First answer." }, { text: "Edited answer." });
    const first = chatEvent({ userId, content: "Tell me something." });
    await stepsOf(chatTurn, first);
    const threadId = first.data.messageId;
    const edit = chatEvent({ userId, threadId, content: "Tell me something else." });
    const { steps } = await stepsOf(chatTurn, { ...edit, data: { ...edit.data, edits: threadId } });
    expect(steps).toEqual([
      "generate-network-id",
      "history.append-user-message",
      "generate-agent-ids-0",
      "assistant",
      "history.append-results",
      "turn.finished",
    ]);
  });

  it("a streamed turn (INFERENCE=stream)", async () => {
    const streaming = createChatTurn(deps({ inference: "stream" }));
    bed.model.script({ text: "Streamed.", stream: { chunks: ["Stre", "amed."] } });
    const event = chatEvent({ userId: `user-${randomUUID()}`, content: "Stream it" });
    const { run, steps } = await stepsOf(streaming, event);
    // The inference ran as this process's step.run, not as a gateway request.
    expect(run.aiInferSteps).toEqual([]);
    expect(steps).toEqual([
      "generate-network-id",
      "history.append-user-message",
      "generate-agent-ids-0",
      "assistant",
      "history.append-results",
      "turn.finished",
    ]);
  });

  it("a turn that logs AgentKit's streaming chunks (EVENT_LOG_CHUNKS)", async () => {
    const logging = createChatTurn(deps({ eventLog: true }));
    bed.model.script({ text: "Logged." });
    const { steps } = await stepsOf(logging, chatEvent({ userId: `user-${randomUUID()}`, content: "Log it" }));
    expect(steps).toEqual([
      "generate-network-id",
      "history.append-user-message",
      "publish-0:run.started",
      "generate-agent-ids-0",
      "publish-1:run.started",
      "assistant",
      "generate-text-part-id-<agentMessage.0>",
      "publish-2:part.created",
      "publish-3:text.delta",
      "publish-4:part.completed",
      "publish-5:run.completed",
      "history.append-results",
      "turn.finished",
    ]);
  });

  it("a turn with user memory that remembers a fact, and its extraction request", async () => {
    const userId = `user-${randomUUID()}`;
    const withMemory = createChatTurn(
      deps({
        agents: {
          network: "assistant",
          memory: { agents: { assistant: ["user-memory"] }, contextTokens: 500, extract: true },
        },
      }),
    );
    bed.model.script({ toolCalls: [{ name: "remember", arguments: { fact: "Prefers tea" } }] }, { text: "Noted." });
    const event = chatEvent({ userId, content: "Remember that I prefer tea." });
    const { steps } = await stepsOf(withMemory, event, { [memoryIdFor(userId, "Prefers tea")]: "<memoryId>" });
    expect(steps).toEqual([
      "generate-network-id",
      "history.append-user-message",
      "generate-agent-ids-0",
      "memory.user-memory.context.assistant.0",
      "assistant",
      "usage.assistant",
      "memory.remember.<memoryId>",
      "generate-agent-ids-1",
      "memory.user-memory.context.assistant.1",
      "assistant:1",
      "history.append-results",
      "turn.finished",
      "memory.request-extraction",
    ]);
  });

  it("a turn of the pair network (assistant, then reviewer)", async () => {
    const pair = createChatTurn(deps({ agents: { network: "pair", memory: NO_MEMORY } }));
    bed.model.script(
      { toolCalls: [{ name: "current_time", id: "call_time_1" }] },
      { text: "It is noon." },
      { text: "OK" },
    );
    const event = chatEvent({ userId: `user-${randomUUID()}`, content: "What time is it?" });
    const { steps } = await stepsOf(pair, event);
    expect(steps).toEqual([
      "generate-network-id",
      "history.append-user-message",
      "agent-state.load",
      "generate-agent-ids-0",
      "assistant",
      "usage.assistant",
      "tool.current-time",
      "generate-agent-ids-1",
      "assistant:1",
      "generate-agent-ids-2",
      // The assistant's final answer is not the turn's last: its usage is recorded before the reviewer's inference.
      "usage.assistant:1",
      "reviewer",
      "agent-state.save",
      "history.append-results",
      "turn.finished",
    ]);
  });

  it("a turn whose summary is due, and the summarization it requests", async () => {
    const userId = `user-${randomUUID()}`;
    const threadId = randomUUID();
    await seedTurns(threadId, userId, 30);
    bed.model.script({ text: "reply 31" });
    const event = chatEvent({ userId, threadId, content: "message 31" });
    const turn = await stepsOf(chatTurn, event);
    expect(turn.run.result).toMatchObject({ summaryRequested: true });
    expect(turn.steps).toEqual([
      "generate-network-id",
      "history.append-user-message",
      "generate-agent-ids-0",
      "assistant",
      "history.append-results",
      "turn.finished",
      "history.request-summary",
    ]);

    const request = turn.run.sentEvents.find((e) => e.name === "thread/summarize.requested")!;
    bed.model.script({ text: "SUMMARY: messages 1 to 11." });
    const summary = await stepsOf(createSummarizeThread(deps()), request);
    expect(summary.run.result).toMatchObject({ status: "stored" });
    expect(summary.steps).toEqual(["summary.load", "summarizer", "summary.store"]);
  });
});

/** Stores answered turns 1..count of a thread through the storage calls a chat turn makes. */
async function seedTurns(threadId: string, userId: string, count: number) {
  await ensureThread(bed.db.pool, threadId, userId);
  for (let i = 1; i <= count; i++) {
    await storeAnsweredTurn(bed.db.pool, { threadId, userId, question: `message ${i}`, answer: `answer ${i}` });
  }
}

describe("golden function ids and event names", () => {
  it("every function the app serves, with its triggers and cancelling events", () => {
    const engine = { kind: "dev" as const, eventUrl: "http://127.0.0.1:8288", apiUrl: "http://127.0.0.1:8288" };
    const functions = createFunctions({ ...deps(), retentionDays: 30, engine });
    type EventRef = string | { name: string };
    type Trigger = { event?: EventRef; cron?: string; if?: string };
    type Opts = { id: string; triggers?: Trigger[]; cancelOn?: { event: EventRef; if?: string; match?: string }[] };
    const nameOf = (event: EventRef | undefined) => (typeof event === "string" ? event : event?.name);
    const table = functions.map((fn) => {
      const { triggers = [], cancelOn = [] } = (fn as unknown as { opts: Opts }).opts;
      return {
        id: fn.id(events.inngest.id),
        triggers: triggers.map((t) => (t.cron ? `cron ${t.cron}` : `${nameOf(t.event)}${t.if ? ` if ${t.if}` : ""}`)),
        cancelOn: cancelOn.map(
          (c) => `${nameOf(c.event)}${c.match ? ` match ${c.match}` : ""}${c.if ? ` if ${c.if}` : ""}`,
        ),
      };
    });
    const turnCancelOn = [
      "chat/turn.stop.requested if async.data.messageId == event.data.messageId",
      "thread/deleted if async.data.threadId == event.data.threadId && async.data.userId == event.data.userId",
      "thread/deleted if async.data.threadId == event.data.messageId && async.data.userId == event.data.userId",
      "user/deleted if async.data.userId == event.data.userId",
    ];
    // Beside a turn: a deleted thread's (or erased user's) summary, title and extraction runs go too.
    const besideTurnCancelOn = [
      "thread/deleted if async.data.threadId == event.data.threadId && async.data.userId == event.data.userId",
      "user/deleted if async.data.userId == event.data.userId",
    ];
    expect(table).toEqual([
      { id: "threadline-chat-turn", triggers: ["chat/message.sent"], cancelOn: turnCancelOn },
      { id: "threadline-regenerate", triggers: ["chat/message.regenerate"], cancelOn: turnCancelOn },
      {
        id: "threadline-summarize-thread",
        triggers: ["thread/summarize.requested"],
        cancelOn: besideTurnCancelOn,
      },
      {
        id: "threadline-turn-cancelled",
        triggers: [
          'inngest/function.cancelled if event.data.function_id == "threadline-chat-turn" || event.data.function_id == "threadline-regenerate"',
        ],
        cancelOn: [],
      },
      {
        id: "threadline-title-thread",
        triggers: ["threadline/turn.finished if event.data.status == 'completed'"],
        cancelOn: ["thread/deleted if async.data.threadId == event.data.threadId"],
      },
      { id: "threadline-thread-retention", triggers: ["cron TZ=UTC 17 * * * *"], cancelOn: [] },
      { id: "threadline-event-retention", triggers: ["cron TZ=UTC */10 * * * *"], cancelOn: [] },
      { id: "threadline-extract-memories", triggers: ["memory/extract.requested"], cancelOn: besideTurnCancelOn },
      // INFERENCE=gateway (the default): each inference attempt of a turn is an invoke of this function.
      { id: "threadline-model-inference", triggers: ["inngest/function.invoked"], cancelOn: [] },
      { id: "threadline-reconcile-turns", triggers: ["cron */2 * * * *"], cancelOn: [] },
    ]);
    const streamed = createFunctions({ ...deps({ inference: "stream" }), retentionDays: 30, engine });
    expect(streamed.map((fn) => fn.id(events.inngest.id))).not.toContain("threadline-model-inference");
  });

  it("every event inngest.config.ts defines", () => {
    const names = Object.values(events as Record<string, unknown>)
      .filter(
        (value): value is { name: string; schema: unknown } =>
          typeof value === "object" &&
          value !== null &&
          "schema" in value &&
          "name" in value &&
          typeof value.name === "string",
      )
      .map((event) => event.name)
      .sort();
    expect(names).toEqual([
      "chat/message.regenerate",
      "chat/message.sent",
      "chat/turn.stop.requested",
      "memory/extract.requested",
      "message/feedback.given",
      "thread/deleted",
      "thread/summarize.requested",
      "threadline/tool.approval.decided",
      "threadline/turn.finished",
      "user/deleted",
    ]);
  });
});
