import { randomUUID } from "node:crypto";
import {
  DefaultChatTransport,
  isToolUIPart,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  type UIMessage,
} from "ai";
import { afterEach, describe, expect, it } from "vitest";
import { inngest } from "../inngest.config.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { CHAT_TURN_ID, createTurnCancellation, REGENERATE_ID } from "../src/functions/turn-lifecycle.js";
import { NO_MEMORY } from "../src/memory/components.js";
import { until, within } from "./helpers/deadline.js";
import { headersFor } from "./helpers/http.js";
import { gate } from "./helpers/model-server.js";
import { Chat } from "./helpers/use-chat.js";
import { useStandInBed } from "./helpers/stand-in-bed.js";

/**
 * The flows a chat app's developer drives with useChat (the `ai` package's own chat client, with
 * DefaultChatTransport over real HTTP), against the app served to the engine stand-in with
 * streamed inference: what the client ends up showing must be what the thread stores.
 */
const CHAT_TURN = `${inngest.id}-${CHAT_TURN_ID}`;
const REGENERATE = `${inngest.id}-${REGENERATE_ID}`;
const userId = "user-1";
const bed = useStandInBed(({ db, model }) => {
  const deps = {
    db,
    model,
    inference: "stream" as const,
    agents: {
      network: "assistant" as const,
      memory: NO_MEMORY,
      approvals: { tools: [], expiryMinutes: 60, demoTool: true },
    },
  };
  return [createChatTurn(deps), createRegenerate(deps), createTurnCancellation({ db })];
});

afterEach(() => {
  bed.engine.release(CHAT_TURN);
  bed.engine.release(REGENERATE);
  bed.model.reset();
});

const transport = (body?: Record<string, unknown>) =>
  new DefaultChatTransport<UIMessage>({
    api: `${bed.url}/api/ui/chat`,
    headers: () => headersFor(userId),
    ...(body ? { body } : {}),
  });

const newChat = (threadId: string = randomUUID(), body?: Record<string, unknown>) =>
  new Chat({ id: threadId, transport: transport(body) });

/** What the client shows: each message's role and visible texts. */
const shown = (chat: Chat) =>
  chat.messages.map((m) => [
    m.role,
    m.parts.flatMap((p) =>
      p.type === "text" && !(p.providerMetadata?.threadline as { superseded?: boolean } | undefined)?.superseded
        ? [p.text]
        : [],
    ),
  ]);

type StoredMessage = {
  id: string;
  role: string;
  content: { text?: string; output?: { type: string; content?: unknown }[] };
};

/** What the thread stores on its current path, as GET /api/threads/:id/messages gives it. */
async function stored(threadId: string) {
  const response = await fetch(`${bed.url}/api/threads/${threadId}/messages?limit=100`, {
    headers: await headersFor(userId),
  });
  expect(response.status).toBe(200);
  const { messages } = (await response.json()) as { messages: StoredMessage[] };
  return messages;
}

const storedShown = async (threadId: string) =>
  (await stored(threadId)).map((m) => [
    m.role,
    m.role === "user"
      ? [m.content.text]
      : (m.content.output ?? []).flatMap((o) => (o.type === "text" ? [o.content as string] : [])),
  ]);

const post = async (path: string, body: unknown) =>
  fetch(`${bed.url}${path}`, { method: "POST", headers: await headersFor(userId), body: JSON.stringify(body) });

describe("useChat's flows over HTTP, against what the thread stores", () => {
  it("send: the answer shown is the one stored, under its id; status ready", async () => {
    const chat = newChat();
    bed.model.script({ text: "Hello there." });
    await within(chat.sendMessage({ text: "Hi" }), "the answer ends");
    expect(chat.status).toBe("ready");
    expect(chat.error).toBeUndefined();
    expect(shown(chat)).toEqual([
      ["user", ["Hi"]],
      ["assistant", ["Hello there."]],
    ]);
    expect(shown(chat)).toEqual(await storedShown(chat.id));
    const ids = (await stored(chat.id)).map((m) => m.id);
    expect(chat.messages[1]!.id).toBe(ids[1]);
  });
});

describe("more flows", () => {
  it("regenerate(): the last answer is replaced by the new one, as stored", async () => {
    const chat = newChat();
    bed.model.script({ text: "Blue." });
    await within(chat.sendMessage({ text: "A colour?" }), "the answer ends");
    bed.model.script({ text: "Green." });
    await within(chat.regenerate(), "the new answer ends");
    expect([chat.status, chat.error]).toEqual(["ready", undefined]);
    expect(shown(chat)).toEqual([
      ["user", ["A colour?"]],
      ["assistant", ["Green."]],
    ]);
    expect(shown(chat)).toEqual(await storedShown(chat.id));
    expect(chat.messages[1]!.id).toBe((await stored(chat.id))[1]!.id);
  });

  it("regenerate({messageId}) of an earlier answer: the client and the thread both end at its new answer", async () => {
    const chat = newChat();
    bed.model.script({ text: "One." }, { text: "Two." });
    await within(chat.sendMessage({ text: "First?" }), "the first answer ends");
    await within(chat.sendMessage({ text: "Second?" }), "the second answer ends");
    bed.model.script({ text: "One again." });
    await within(chat.regenerate({ messageId: chat.messages[1]!.id }), "the new answer ends");
    expect([chat.status, chat.error]).toEqual(["ready", undefined]);
    expect(shown(chat)).toEqual([
      ["user", ["First?"]],
      ["assistant", ["One again."]],
    ]);
    expect(shown(chat)).toEqual(await storedShown(chat.id));
    expect(chat.messages[1]!.id).toBe((await stored(chat.id))[1]!.id);
  });

  it("edit: sendMessage({text, messageId}) of an earlier message: a new branch, shown as stored", async () => {
    const chat = newChat();
    bed.model.script({ text: "Paris." }, { text: "Berlin." });
    await within(chat.sendMessage({ text: "France?" }), "the first answer ends");
    await within(chat.sendMessage({ text: "Germany?" }), "the second answer ends");
    bed.model.script({ text: "Rome." });
    await within(chat.sendMessage({ text: "Italy?", messageId: chat.messages[0]!.id }), "the edit's answer ends");
    expect([chat.status, chat.error]).toEqual(["ready", undefined]);
    expect(shown(chat)).toEqual([
      ["user", ["Italy?"]],
      ["assistant", ["Rome."]],
    ]);
    expect(shown(chat)).toEqual(await storedShown(chat.id));
    // A second edit of the same message, and a regenerate of its answer, go on from what is shown.
    bed.model.script({ text: "Madrid." });
    await within(chat.sendMessage({ text: "Spain?", messageId: chat.messages[0]!.id }), "the second edit ends");
    expect(shown(chat)).toEqual(await storedShown(chat.id));
    bed.model.script({ text: "Madrid, again." });
    await within(chat.regenerate(), "the regenerate ends");
    expect([chat.status, chat.error]).toEqual(["ready", undefined]);
    expect(shown(chat)).toEqual([
      ["user", ["Spain?"]],
      ["assistant", ["Madrid, again."]],
    ]);
    expect(shown(chat)).toEqual(await storedShown(chat.id));
  });

  it("a failed turn (the model failing through its retries): the error shown, and no empty answer", async () => {
    const chat = newChat();
    // Every attempt fails: the scripted model answers 500 once its script is exhausted.
    await within(chat.sendMessage({ text: "Break" }), "the request ends");
    expect(chat.status).toBe("error");
    expect(chat.error?.message).toMatch(/HTTP 500/);
    expect(shown(chat)).toEqual([["user", ["Break"]]]);
    expect(shown(chat)).toEqual(await storedShown(chat.id));
    // Regenerate after it answers.
    bed.model.script({ text: "Fixed." });
    await within(chat.regenerate(), "the regenerate ends");
    expect([chat.status, chat.error]).toEqual(["ready", undefined]);
    expect(shown(chat)).toEqual([
      ["user", ["Break"]],
      ["assistant", ["Fixed."]],
    ]);
    expect(shown(chat)).toEqual(await storedShown(chat.id));
  });

  it("the stop route while useChat streams: its stream ends, the partial answer shown is the one stored", async () => {
    const chat = newChat();
    const held = gate();
    bed.model.script({
      text: "Once upon a time.",
      stream: { chunks: ["Once", " upon", " a time."], holdAfter: { chunks: 2, gate: held } },
    });
    const sending = chat.sendMessage({ text: "A story?" });
    await within(held.reached, "the model is held");
    await until(() => JSON.stringify(shown(chat)).includes("Once upon"), "the partial answer is shown");
    const stop = await post(`/api/threads/${chat.id}/stop`, {});
    expect(stop.status).toBe(202);
    await within(sending, "the stream ends");
    held.release();
    expect([chat.status, chat.error]).toEqual(["ready", undefined]);
    expect(shown(chat)).toEqual([
      ["user", ["A story?"]],
      ["assistant", ["Once upon"]],
    ]);
    expect(chat.messages[1]!.metadata).toMatchObject({ status: "stopped" });
    expect(shown(chat)).toEqual(await storedShown(chat.id));
  });

  it("resume after a reload: a new client with the stored messages resumes the running answer", async () => {
    const threadId = randomUUID();
    const first = newChat(threadId);
    const held = gate();
    bed.model.script({
      text: "Long answer.",
      stream: { chunks: ["Long", " answer."], holdAfter: { chunks: 1, gate: held } },
    });
    const sending = first.sendMessage({ text: "Tell me." });
    await within(held.reached, "the model is held");
    await first.stop();
    const reloaded = newChat(threadId);
    reloaded.messages = (await stored(threadId)).map((m) => ({
      id: m.id,
      role: m.role as "user",
      parts: [{ type: "text" as const, text: m.content.text ?? "" }],
    }));
    const resuming = reloaded.resumeStream();
    await until(() => reloaded.status === "streaming", "the resumed stream streams");
    held.release();
    await within(resuming, "the resumed stream ends");
    await within(sending, "the first request ends");
    expect([reloaded.status, reloaded.error]).toEqual(["ready", undefined]);
    expect(shown(reloaded)).toEqual([
      ["user", ["Tell me."]],
      ["assistant", ["Long answer."]],
    ]);
    expect(shown(reloaded)).toEqual(await storedShown(threadId));
    // Nothing runs now: resume is a no-op.
    await within(reloaded.resumeStream(), "the second resume ends");
    expect([reloaded.status, reloaded.messages.length]).toEqual(["ready", 2]);
  });
});

describe("a message sent while an answer streams (busy policies)", () => {
  for (const busy of ["enqueue", "interrupt"] as const) {
    it(`${busy}: both answers shown in order, as stored${busy === "interrupt" ? " (the first one stopped where it was)" : ""}`, async () => {
      const chat = newChat(randomUUID(), { busy });
      const held = gate();
      bed.model.script(
        { text: "First answer.", stream: { chunks: ["First", " answer."], holdAfter: { chunks: 1, gate: held } } },
        { text: "Second answer." },
      );
      const first = chat.sendMessage({ text: "First?" });
      await within(held.reached, "the model is held");
      await until(() => chat.messages[1]?.role === "assistant", "the partial answer is shown");
      const second = chat.sendMessage({ text: "Second?" });
      if (busy === "enqueue") {
        const runs = () => bed.engine.runs.filter((r) => r.fnId === CHAT_TURN && r.event.data.threadId === chat.id);
        await until(() => runs().length === 2, "the second message's run starts");
      } else {
        // The interrupt stops the first turn while its model is still held.
        await within(first, "the first answer's stream ends");
      }
      held.release();
      await within(Promise.all([first, second]), "both requests end");
      expect([chat.status, chat.error]).toEqual(["ready", undefined]);
      expect(shown(chat)).toEqual([
        ["user", ["First?"]],
        ["assistant", [busy === "enqueue" ? "First answer." : "First"]],
        ["user", ["Second?"]],
        ["assistant", ["Second answer."]],
      ]);
      expect(shown(chat)).toEqual(await storedShown(chat.id));
      expect(chat.messages[1]!.metadata).toMatchObject({ status: busy === "enqueue" ? "completed" : "stopped" });
    });
  }

  it("reject, from another tab: a 409 naming the running turn is the chat's error; the running answer is untouched", async () => {
    const threadId = randomUUID();
    const tab = newChat(threadId);
    const other = newChat(threadId, { busy: "reject" });
    const held = gate();
    bed.model.script({
      text: "First answer.",
      stream: { chunks: ["First", " answer."], holdAfter: { chunks: 1, gate: held } },
    });
    const first = tab.sendMessage({ text: "First?" });
    await within(held.reached, "the model is held");
    await within(other.sendMessage({ text: "Second?" }), "the refused request ends");
    expect(other.status).toBe("error");
    expect(other.error?.message).toMatch(/thread_busy/);
    held.release();
    await within(first, "the first answer ends");
    expect([tab.status, tab.error]).toEqual(["ready", undefined]);
    expect(shown(tab)).toEqual(await storedShown(threadId));
  });
});

describe("approvals", () => {
  it("addToolApprovalResponse approving a call: the tool part ends with the output the thread stores, then the answer's text", async () => {
    const chat = new Chat({
      id: randomUUID(),
      transport: transport(),
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    });
    bed.model.script(
      { toolCalls: [{ name: "roll_dice", id: "call_1", arguments: { count: 1, sides: 6 } }] },
      { text: "Rolled." },
    );
    await within(chat.sendMessage({ text: "Roll" }), "the first stream ends");
    const part = () => chat.messages[1]!.parts.find(isToolUIPart)!;
    const { approval } = part() as { approval: { id: string } };
    await chat.addToolApprovalResponse({ id: approval.id, approved: true });
    await until(() => chat.status === "ready" && JSON.stringify(chat.messages).includes("Rolled."), "the answer ends");
    expect(chat.error).toBeUndefined();
    expect(shown(chat)).toEqual([
      ["user", ["Roll"]],
      ["assistant", ["Rolled."]],
    ]);
    const answer = (await stored(chat.id))[1]! as unknown as {
      content: { toolCalls: { tool: { id: string }; content: { data: unknown } }[] };
    };
    const [result] = answer.content.toolCalls;
    expect(result!.tool.id).toBe("call_1");
    expect(part()).toMatchObject({ toolCallId: "call_1", state: "output-available", output: result!.content.data });
    expect(chat.messages.map((m) => m.role)).toEqual(["user", "assistant"]);
  });
  it("a reload while the approved call's turn goes on: the resumed answer ends with the tool's output", async () => {
    const threadId = randomUUID();
    const chat = newChat(threadId);
    const held = gate();
    bed.model.script(
      { toolCalls: [{ name: "roll_dice", id: "call_2", arguments: { count: 2, sides: 6 } }] },
      { text: "Rolled twice.", stream: { chunks: ["Rolled", " twice."], holdAfter: { chunks: 1, gate: held } } },
    );
    await within(chat.sendMessage({ text: "Roll two" }), "the first stream ends");
    const { approval } = chat.messages[1]!.parts.find(isToolUIPart)! as { approval: { id: string } };
    // Decided elsewhere (the playground, another tab): this page reloads and resumes.
    const decided = await post(`/api/threads/${threadId}/approvals/${approval.id}`, {
      decision: "approve",
      requestId: randomUUID(),
    });
    expect(decided.status).toBe(200);
    await within(held.reached, "the answer after the tool is held");
    const reloaded = newChat(threadId);
    reloaded.messages = chat.messages.slice(0, 1);
    const resuming = reloaded.resumeStream();
    await until(() => reloaded.status === "streaming", "the resumed stream streams");
    held.release();
    await within(resuming, "the resumed stream ends");
    expect([reloaded.status, reloaded.error]).toEqual(["ready", undefined]);
    expect(shown(reloaded)).toEqual([
      ["user", ["Roll two"]],
      ["assistant", ["Rolled twice."]],
    ]);
    const answer = (await stored(threadId))[1]! as unknown as {
      content: { toolCalls: { content: { data: unknown } }[] };
    };
    expect(reloaded.messages[1]!.parts.find(isToolUIPart)).toMatchObject({
      toolCallId: "call_2",
      state: "output-available",
      output: answer.content.toolCalls[0]!.content.data,
    });
  });
});

describe("endings with nothing shown", () => {
  it("the stop route before any text arrived: no empty answer, status ready, as the thread stores (no answer)", async () => {
    const chat = newChat();
    bed.model.script({ text: "Too late.", delayMs: 1_000 });
    const sending = chat.sendMessage({ text: "Slow?" });
    await until(() => bed.model.requests.length === 1, "the model is asked");
    const stop = await post(`/api/threads/${chat.id}/stop`, {});
    expect(stop.status).toBe(202);
    expect(await stop.json()).toMatchObject({ answerStored: false });
    await within(sending, "the stream ends");
    expect([chat.status, chat.error]).toEqual(["ready", undefined]);
    expect(shown(chat)).toEqual([["user", ["Slow?"]]]);
    expect(shown(chat)).toEqual(await storedShown(chat.id));
  });

  it("a turn cancelled while it waited behind another: the cause shown, and no empty answer", async () => {
    const threadId = randomUUID();
    const tab = newChat(threadId);
    const other = newChat(threadId);
    const held = gate();
    bed.model.script(
      { text: "First answer.", stream: { chunks: ["First", " answer."], holdAfter: { chunks: 1, gate: held } } },
      { text: "Never asked." },
    );
    const first = tab.sendMessage({ text: "First?" });
    await within(held.reached, "the model is held");
    const second = other.sendMessage({ text: "Second?" });
    const run = await bed.engine.runFor(
      (r) => r.fnId === CHAT_TURN && r.event.data.threadId === threadId && r.event.data.content === "Second?",
    );
    // Its turn began (the message is stored) and waits for the first one.
    await until(() => run.order.length > 0, "the second turn began");
    bed.engine.cancel(run);
    await within(second, "the cancelled turn's stream ends");
    expect(other.status).toBe("error");
    expect(other.error?.message).toBe("The run was cancelled.");
    expect(shown(other)).toEqual([["user", ["Second?"]]]);
    held.release();
    await within(first, "the first answer ends");
    const stored = await storedShown(threadId);
    expect(stored.filter(([role]) => role === "assistant")).toEqual([["assistant", ["First answer."]]]);
  });
});
