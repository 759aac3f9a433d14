import { randomUUID } from "node:crypto";
import {
  DefaultChatTransport,
  isToolUIPart,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  type UIMessage,
} from "ai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { listApprovals } from "../src/history/approvals.js";
import { NO_MEMORY } from "../src/memory/components.js";
import { createEventNotifier, type EventNotifier } from "../src/stream/notifier.js";
import { execute, type Execution } from "./helpers/engine.js";
import { scriptedModel } from "./helpers/fixtures.js";
import { createTestApp, headersFor, type SentEvent } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";
import { Chat } from "./helpers/use-chat.js";

/**
 * The AI SDK's needsApproval protocol, end to end with the `ai` package's own chat client
 * (AbstractChat, as useChat drives it): the stream shows the tool call awaiting approval,
 * addToolApprovalResponse sends the decision on the next /api/ui/chat request, and the answer goes on.
 */

const bed = useTestBed();
let events: EventNotifier;
let app: ReturnType<typeof createTestApp>["app"];
let sent: SentEvent[];
let chatTurn: ReturnType<typeof createChatTurn>;

beforeAll(() => {
  events = createEventNotifier(bed.db.pool);
  ({ app, sent } = createTestApp(bed.db.pool, { events }));
  chatTurn = createChatTurn({
    db: bed.db.pool,
    model: scriptedModel(bed.model),
    agents: { network: "assistant", memory: NO_MEMORY, approvals: { tools: [], expiryMinutes: 60, demoTool: true } },
  });
});
beforeEach(() => {
  sent.length = 0;
});
afterAll(async () => {
  await events.close();
});

const transport = () =>
  new DefaultChatTransport<UIMessage>({
    api: "http://threadline.test/api/ui/chat",
    headers: () => headersFor("user-1"),
    fetch: ((url: string | URL | Request, init?: RequestInit) => app.request(String(url), init)) as typeof fetch,
  });

const newChat = (id: string) =>
  new Chat({ id, transport: transport(), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses });

async function until(done: () => boolean | Promise<boolean>) {
  const deadline = Date.now() + 10_000;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error("condition not reached within 10 s");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const DICE_CALL = { name: "roll_dice", id: "call_dice_ui", arguments: { count: 1, sides: 20 } };

const toolPart = (chat: Chat) => chat.messages.at(-1)!.parts.find(isToolUIPart);
const texts = (chat: Chat) =>
  chat.messages
    .at(-1)!
    .parts.flatMap((p) => (p.type === "text" ? [p.text] : []))
    .join("");

/** Executes the turn the chat's message started; its wait ends with the decided event the app sends. */
async function runTurn(): Promise<Execution> {
  await until(() => sent.some((e) => e.name === "chat/message.sent"));
  const event = sent.find((e) => e.name === "chat/message.sent")!;
  return execute(chatTurn, event, {
    waits: async () => {
      await until(() => sent.some((e) => e.name === "threadline/tool.approval.decided"));
      return sent.find((e) => e.name === "threadline/tool.approval.decided")!;
    },
  });
}

describe("useChat's approval flow on /api/ui/chat", () => {
  for (const approved of [true, false]) {
    it(`the client reads the approval request, ${approved ? "approves" : "denies"} it, and the answer goes on in the same message`, async () => {
      const threadId = randomUUID();
      const chat = newChat(threadId);
      bed.model.script({ toolCalls: [DICE_CALL] }, { text: approved ? "You rolled it." : "Not rolled." });
      const sending = chat.sendMessage({ text: "Roll a d20." });
      const turn = runTurn();
      await sending;

      // The first stream ended at the request: the tool part awaits approval, with its arguments.
      expect(chat.status).toBe("ready");
      const part = toolPart(chat)!;
      expect(part).toMatchObject({
        type: "tool-roll_dice",
        toolCallId: DICE_CALL.id,
        state: "approval-requested",
        input: DICE_CALL.arguments,
      });
      const approvalId = (part as { approval: { id: string } }).approval.id;

      // A reload mid-wait (useChat's resume) shows the same request, and ends there too.
      const resumed = await transport().reconnectToStream({ chatId: threadId });
      const chunks: { type: string }[] = [];
      for await (const chunk of resumed!) chunks.push(chunk);
      expect(chunks.map((c) => c.type)).toEqual([
        "start",
        "start-step",
        "tool-input-available",
        "tool-approval-request",
        "finish-step",
        "finish",
      ]);
      expect(chunks.at(-1)).toMatchObject({
        finishReason: "tool-calls",
        messageMetadata: { status: "awaiting_approval" },
      });
      expect(await listApprovals(bed.db.pool, { threadId, userId: "user-1", status: "pending" })).toMatchObject([
        { approvalId },
      ]);

      await chat.addToolApprovalResponse({ id: approvalId, approved, ...(approved ? {} : { reason: "not now" }) });
      const run = await turn;
      expect(run.error).toBeUndefined();
      await until(() => chat.status === "ready" && texts(chat).length > 0);

      expect(chat.messages.map((m) => m.role)).toEqual(["user", "assistant"]);
      expect(texts(chat)).toBe(approved ? "You rolled it." : "Not rolled.");
      // An approved call shows the tool's output once the turn stored it (as the AI SDK's own flow shows it).
      expect(toolPart(chat)!.state).toBe(approved ? "output-available" : "output-denied");
      if (approved) expect(toolPart(chat)).toMatchObject({ output: { rolls: [expect.any(Number)] } });
      expect(run.stepIds.includes("tool.roll-dice")).toBe(approved);
      expect(await listApprovals(bed.db.pool, { threadId, userId: "user-1" })).toMatchObject([
        { approvalId, status: approved ? "approved" : "denied", decidedBy: "user" },
      ]);
      // Nothing is sent again automatically: the answer's last step holds no tool part.
      expect(sent.filter((e) => e.name === "threadline/tool.approval.decided")).toHaveLength(1);
    });
  }
});
