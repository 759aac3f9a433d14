import { randomUUID } from "node:crypto";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ASSISTANT_NAME, ASSISTANT_SYSTEM_PROMPT } from "../src/agents/assistant.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { decideApproval, requestApproval } from "../src/history/approvals.js";
import { appendEvents } from "../src/history/events.js";
import { resultId } from "../src/history/ids.js";
import { importUserData } from "../src/history/import.js";
import { MAX_PAGE_SIZE, readMessagePage } from "../src/history/message-pages.js";
import { beginTurn, storeAnswer } from "../src/history/store.js";
import { storeAnsweredTurn } from "./helpers/seed.js";
import { execute } from "./helpers/engine.js";
import {
  chatEvent,
  conversation,
  countRows,
  scriptedModel,
  threadRows,
  threadWithRunningTurn,
} from "./helpers/fixtures.js";
import { createTestDatabase } from "./helpers/database.js";
import { asUser, createTestApp, type SentEvent } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

/*
 * The conversation tree (issue 21 item 1): an edit makes a sibling branch answered with the
 * history before the edited message, the old branch stays whole and can be switched back to,
 * and every later turn follows the current path. Edits go through the HTTP route and the event
 * it sends is executed as Inngest would.
 */

const bed = useTestBed();

let chatTurn: ReturnType<typeof createChatTurn>;
let regenerate: ReturnType<typeof createRegenerate>;
let app: ReturnType<typeof createTestApp>["app"];
let sent: SentEvent[];

beforeAll(() => {
  chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
  regenerate = createRegenerate({ db: bed.db.pool, model: scriptedModel(bed.model) });
  ({ app, sent } = createTestApp(bed.db.pool));
});
beforeEach(() => {
  sent.length = 0;
});

const system = { role: "system", content: ASSISTANT_SYSTEM_PROMPT };
const user = (content: string) => ({ role: "user", content });
const assistant = (content: string) => ({ role: "assistant", content });

type Shown = {
  id: string;
  role: string;
  content: { text?: string; output?: { content: string }[] };
  siblings?: { count: number; position: number; ids: string[] };
};

const answerContent = (text: string) => ({
  output: [{ type: "text" as const, role: "assistant" as const, content: text }],
  toolCalls: [],
});
const textOf = (m: Shown) => m.content.text ?? (m.content.output ?? []).map((o) => o.content).join("");

async function shown(threadId: string): Promise<Shown[]> {
  return (await readMessagePage(bed.db.pool, { threadId, userId: "user-1", limit: MAX_PAGE_SIZE })).messages as Shown[];
}
const shownTexts = async (threadId: string) => (await shown(threadId)).map(textOf);

const edit = (threadId: string, messageId: string, body: { messageId: string; content: string }) =>
  asUser(app, "user-1").post(`/api/threads/${threadId}/messages/${messageId}/edit`, body);
const makeCurrent = (threadId: string, messageId: string) =>
  asUser(app, "user-1").put(`/api/threads/${threadId}/messages/${messageId}/current`);

/** Posts an edit and executes the event it sent; returns that event. */
async function editAndAnswer(threadId: string, editedId: string, content: string, answer: string) {
  const messageId = randomUUID();
  const response = await edit(threadId, editedId, { messageId, content });
  expect(response.status).toBe(202);
  const event = sent.at(-1)!;
  expect(event).toMatchObject({ name: "chat/message.sent", data: { messageId, edits: editedId, threadId } });
  bed.model.script({ text: answer });
  expect((await execute(chatTurn, { name: event.name, data: event.data })).error).toBeUndefined();
  return { messageId, event };
}

const fourTurns: [string, string][] = [
  ["One?", "1"],
  ["Two?", "2"],
  ["Three?", "3"],
  ["Four?", "4"],
];
const wholeOldBranch = ["One?", "1", "Two?", "2", "Three?", "3", "Four?", "4"];

describe("editing the 2nd of 4 messages", () => {
  it("answers the edit with exactly the messages before it; the old branch stays whole, selectable, and restored by a switch", async () => {
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, fourTurns);
    const second = messageIds[1]!;

    const { messageId: edited } = await editAndAnswer(threadId, second, "Two, edited?", "2'");

    expect(bed.model.requests).toHaveLength(1);
    expect(bed.model.requests[0]!.messages).toEqual([system, user("One?"), assistant("1"), user("Two, edited?")]);
    expect(await shownTexts(threadId)).toEqual(["One?", "1", "Two, edited?", "2'"]);
    // The old branch is kept whole, off the path.
    const offPath = (await threadRows(bed.db.pool, threadId)).filter((r) => !r.on_path);
    expect(offPath).toHaveLength(6);

    // The edit and the edited message are siblings; the first message has none.
    const path = await shown(threadId);
    expect(path[2]!.siblings).toEqual({ count: 2, position: 2, ids: [second, edited] });
    expect(path[0]!.siblings).toEqual({ count: 1, position: 1, ids: [messageIds[0]] });
    expect(path[3]!.siblings).toMatchObject({ count: 1, position: 1 });

    // Switching back restores the old branch whole, its siblings pointing the other way.
    const back = await makeCurrent(threadId, second);
    expect(back.status).toBe(200);
    expect(await back.json()).toMatchObject({ threadId, messageId: second, changed: 8 });
    expect(await shownTexts(threadId)).toEqual(wholeOldBranch);
    expect((await shown(threadId))[2]!.siblings).toEqual({ count: 2, position: 1, ids: [second, edited] });
    // The log tells live clients, after the edit and after the switch.
    const logged = await bed.db.pool.query(
      "SELECT data FROM thread_events WHERE thread_id = $1 AND event = 'thread.path.changed' ORDER BY id",
      [threadId],
    );
    expect(logged.rows.map((row) => row.data.messageId)).toEqual([edited, second]);

    // Switching again is a no-op; switching to the edit brings it back.
    expect(await (await makeCurrent(threadId, second)).json()).toMatchObject({ changed: 0 });
    expect((await makeCurrent(threadId, edited)).status).toBe(200);
    expect(await shownTexts(threadId)).toEqual(["One?", "1", "Two, edited?", "2'"]);

    // The next turn follows the current branch.
    bed.model.script({ text: "3'" });
    const next = {
      name: "chat/message.sent",
      data: { userId: "user-1", threadId, messageId: randomUUID(), content: "Next?" },
    };
    expect((await execute(chatTurn, next)).error).toBeUndefined();
    expect(bed.model.requests[1]!.messages).toEqual([
      system,
      user("One?"),
      assistant("1"),
      user("Two, edited?"),
      assistant("2'"),
      user("Next?"),
    ]);

    // And a switch back to the old branch still finds it whole.
    expect((await makeCurrent(threadId, messageIds[3]!)).status).toBe(200);
    expect(await shownTexts(threadId)).toEqual(wholeOldBranch);
  });

  it("stores nothing twice: a retried edit request, a re-run of its event, and a re-run regenerate on the branch", async () => {
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, fourTurns);
    const { messageId, event } = await editAndAnswer(threadId, messageIds[1]!, "Two, edited?", "2'");
    const stored = await countRows(bed.db.pool);

    // The same edit request again: accepted (the same event id, so Inngest drops it) and its run stores nothing.
    const retried = await edit(threadId, messageIds[1]!, { messageId, content: "Two, edited?" });
    expect(retried.status).toBe(202);
    expect(sent.at(-1)).toEqual(event);
    const rerun = await execute(chatTurn, { name: event.name, data: event.data });
    expect(rerun.result).toMatchObject({ status: "skipped" });
    expect(bed.model.requests).toHaveLength(1);
    expect(await countRows(bed.db.pool)).toEqual({ ...stored, turns: stored.turns + 1 });
    expect(await shownTexts(threadId)).toEqual(["One?", "1", "Two, edited?", "2'"]);

    // A regenerate on the branch, its event run twice (a re-run): one new variant, the answers' siblings.
    const regenerateEvent = {
      id: `event-${randomUUID()}`,
      name: "chat/message.regenerate",
      data: { userId: "user-1", threadId, messageId, requestId: randomUUID() },
    };
    bed.model.script({ text: "2''" });
    const first = await execute(regenerate, regenerateEvent);
    expect(first.error).toBeUndefined();
    expect(bed.model.requests[1]!.messages).toEqual([system, user("One?"), assistant("1"), user("Two, edited?")]);
    const afterRegenerate = await countRows(bed.db.pool);
    expect(afterRegenerate.messages).toBe(stored.messages + 1);
    const again = await execute(regenerate, regenerateEvent);
    expect(again.result).toMatchObject({ status: "skipped" });
    expect(bed.model.requests).toHaveLength(2);
    expect((await countRows(bed.db.pool)).messages).toBe(afterRegenerate.messages);

    const path = await shown(threadId);
    expect(path.map(textOf)).toEqual(["One?", "1", "Two, edited?", "2''"]);
    expect(path[3]!.siblings).toMatchObject({ count: 2, position: 2 });
    // The first variant is selectable like an edit.
    expect((await makeCurrent(threadId, path[3]!.siblings!.ids[0]!)).status).toBe(200);
    expect(await shownTexts(threadId)).toEqual(["One?", "1", "Two, edited?", "2'"]);
  });
});

describe("an edit event whose edited message left the path before its run began", () => {
  it("fails without retries, storing nothing", async () => {
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, fourTurns.slice(0, 2));
    await editAndAnswer(threadId, messageIds[1]!, "Two, edited?", "2'");
    const stored = await countRows(bed.db.pool);
    const late = {
      name: "chat/message.sent",
      data: { userId: "user-1", threadId, messageId: randomUUID(), content: "Two, again?", edits: messageIds[1]! },
    };
    const run = await execute(chatTurn, late);
    expect(run.error).toMatchObject({
      name: "NonRetriableError",
      message: expect.stringContaining("no longer on the thread's current path"),
    });
    expect(await countRows(bed.db.pool)).toEqual(stored);
  });
});

describe("answer variants are branches too", () => {
  it("switching back to an earlier answer variant brings back the turns that followed it", async () => {
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, fourTurns.slice(0, 3));
    bed.model.script({ text: "1 again" });
    expect(
      (
        await execute(regenerate, {
          name: "chat/message.regenerate",
          data: { userId: "user-1", threadId, messageId: messageIds[0]! },
        })
      ).error,
    ).toBeUndefined();
    expect(await shownTexts(threadId)).toEqual(["One?", "1 again"]);

    const answer = (await shown(threadId))[1]!;
    expect(answer.siblings).toMatchObject({ count: 2, position: 2 });
    expect((await makeCurrent(threadId, answer.siblings!.ids[0]!)).status).toBe(200);
    expect(await shownTexts(threadId)).toEqual(["One?", "1", "Two?", "2", "Three?", "3"]);
    expect((await makeCurrent(threadId, answer.id)).status).toBe(200);
    expect(await shownTexts(threadId)).toEqual(["One?", "1 again"]);
  });
});

describe("while a turn runs", () => {
  it("refuses a switch and an edit with 409 naming the running turn, changing nothing", async () => {
    const { threadId, attempt, event } = await threadWithRunningTurn(
      bed.db.pool,
      chatTurn,
      bed.model,
      "Still thinking?",
    );
    const first = (await shown(threadId))[0]!;
    const before = await threadRows(bed.db.pool, threadId);

    const switched = await makeCurrent(threadId, first.id);
    expect(switched.status).toBe(409);
    expect(await switched.json()).toMatchObject({
      code: "thread_busy",
      error: expect.stringContaining(attempt.runId),
      runningTurn: { runId: attempt.runId, messageId: event.data.messageId },
    });
    const edited = await edit(threadId, first.id, { messageId: randomUUID(), content: "Hi?" });
    expect(edited.status).toBe(409);
    expect(await edited.json()).toMatchObject({ code: "thread_busy", error: expect.stringContaining(attempt.runId) });
    expect(sent).toEqual([]);
    expect(await threadRows(bed.db.pool, threadId)).toEqual(before);
  });
});

describe("deleting a branch", () => {
  it("deletes an off-path branch with everything after it, and refuses the current one", async () => {
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, fourTurns);
    await editAndAnswer(threadId, messageIds[1]!, "Two, edited?", "2'");
    const del = (messageId: string) =>
      asUser(app, "user-1").delete(`/api/threads/${threadId}/messages/${messageId}/branch`);

    const refused = await del(messageIds[0]!);
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({ code: "branch_on_path" });

    expect((await del(messageIds[1]!)).status).toBe(200);
    const rows = await threadRows(bed.db.pool, threadId);
    expect(rows).toHaveLength(4);
    expect(rows.every((r) => r.on_path)).toBe(true);
    expect((await shown(threadId))[2]!.siblings).toMatchObject({ count: 1 });
  });
});

describe("a deleted branch's message replayed", () => {
  it("is not stored again: its event run again (a replay, a re-delivery) fails without retries, storing nothing; sent again, it is refused", async () => {
    const threadId = randomUUID();
    bed.model.script({ text: "1" });
    const first = chatEvent({ content: "One?", messageId: threadId });
    expect((await execute(chatTurn, first)).error).toBeUndefined();
    bed.model.script({ text: "2" });
    const second = chatEvent({ content: "Two?", messageId: randomUUID(), threadId });
    expect((await execute(chatTurn, second)).error).toBeUndefined();
    bed.model.script({ text: "3" });
    const third = chatEvent({ content: "Three?", messageId: randomUUID(), threadId });
    expect((await execute(chatTurn, third)).error).toBeUndefined();
    await editAndAnswer(threadId, second.data.messageId, "Two, edited?", "2'");
    expect(
      (await asUser(app, "user-1").delete(`/api/threads/${threadId}/messages/${second.data.messageId}/branch`)).status,
    ).toBe(200);
    const kept = await threadRows(bed.db.pool, threadId);

    // The deleted message and the one below it, each replayed.
    for (const event of [second, third]) {
      bed.model.script({ text: "again" });
      expect((await execute(chatTurn, event)).error).toMatchObject({
        name: "NonRetriableError",
        message: expect.stringContaining(`Message ${event.data.messageId} was deleted with its branch`),
      });
    }
    expect(await threadRows(bed.db.pool, threadId)).toEqual(kept);
    expect(await shownTexts(threadId)).toEqual(["One?", "1", "Two, edited?", "2'"]);

    // Sent again over HTTP under its id, it is refused before any event is sent.
    sent.length = 0;
    const again = await asUser(app, "user-1").post("/api/chat", {
      threadId,
      messageId: second.data.messageId,
      content: "Two?",
    });
    expect(again.status).toBe(409);
    expect(await again.json()).toEqual({
      code: "message_conflict",
      error: expect.stringContaining(`Message id ${second.data.messageId} was deleted with its branch`),
    });
    expect(sent).toEqual([]);
  });
});

describe("deleting a branch with a tool call's approval", () => {
  it("deletes the approval and the event log of its runs with the branch: the thread's approvals, its log and its export no longer hold them, and the export imports", async () => {
    const userId = "user-1";
    const threadId = randomUUID();
    const rolled = randomUUID();
    const asked = await beginTurn(bed.db.pool, {
      threadId,
      userId,
      message: { id: rolled, text: "Roll for my secret plan" },
      turn: { runId: `run-${rolled}`, kind: "chat" },
    });
    const approvalId = randomUUID();
    await requestApproval(bed.db.pool, {
      approvalId,
      runId: `run-${rolled}`,
      toolCallId: "call_dice",
      toolName: "roll_dice",
      arguments: { sides: 20 },
      expiresInSeconds: 600,
    });
    await decideApproval(bed.db.pool, { threadId, userId, approvalId, decision: "deny", reason: "my secret plan" });
    // The answer as a streamed inference logs it (INFERENCE=stream).
    await appendEvents(bed.db.pool, {
      threadId,
      runId: `run-${rolled}`,
      attempt: 0,
      events: [
        {
          key: "infer:delta:0",
          event: "text.delta",
          data: { runId: `run-${rolled}`, stepId: "infer", attempt: 0, delta: "No roll for the secret plan." },
        },
      ],
    });
    await storeAnswer(bed.db.pool, {
      threadId,
      userId,
      runId: `run-${rolled}`,
      messageId: rolled,
      messageSeq: asked.messageSeq,
      variant: asked.variant,
      detachLaterTurns: false,
      results: [
        { id: resultId(rolled, asked.variant, 0), agentName: ASSISTANT_NAME, content: answerContent("No roll.") },
      ],
    });
    const edited = randomUUID();
    await beginTurn(bed.db.pool, {
      threadId,
      userId,
      message: { id: edited, text: "Never mind" },
      turn: { runId: `run-${edited}`, kind: "chat" },
      context: { edits: rolled },
    });
    await bed.db.pool.query("UPDATE turns SET status = 'completed', finished_at = now() WHERE run_id = $1", [
      `run-${edited}`,
    ]);

    expect((await asUser(app, userId).delete(`/api/threads/${threadId}/messages/${rolled}/branch`)).status).toBe(200);

    const approvals = await asUser(app, userId).get(`/api/threads/${threadId}/approvals`);
    expect(await approvals.json()).toEqual({ approvals: [] });
    const exported = await (await asUser(app, userId).get("/api/export")).text();
    expect(exported).not.toContain('"type":"approval"');
    // Nor does the thread's event log keep the branch's words: its runs' events went with it.
    expect(exported).not.toMatch(/secret plan/i);
    const { rows: logged } = await bed.db.pool.query("SELECT data::text FROM thread_events WHERE thread_id = $1", [
      threadId,
    ]);
    expect(logged.map((row) => row.data).join()).not.toMatch(/secret plan/i);
    const target = await createTestDatabase();
    try {
      await importUserData(
        target.pool,
        (async function* () {
          yield* exported.split("\n");
        })(),
      );
    } finally {
      await target.drop();
    }
  });

  it("deleting an answer variant deletes its run's event log, and keeps the other variant's", async () => {
    const userId = "user-1";
    const threadId = randomUUID();
    const { messageId } = await storeAnsweredTurn(bed.db.pool, { threadId, userId, question: "Q?", answer: "A." });
    const regen = await beginTurn(bed.db.pool, {
      threadId,
      userId,
      message: { id: messageId, text: "Q?" },
      turn: { runId: `regen-${messageId}`, kind: "regenerate" },
    });
    const variantAnswer = resultId(messageId, regen.variant, 0);
    await storeAnswer(bed.db.pool, {
      threadId,
      userId,
      runId: `regen-${messageId}`,
      messageId,
      messageSeq: regen.messageSeq,
      variant: regen.variant,
      detachLaterTurns: true,
      results: [{ id: variantAnswer, agentName: ASSISTANT_NAME, content: answerContent("A, again.") }],
    });
    for (const runId of [`run-${messageId}`, `regen-${messageId}`])
      await appendEvents(bed.db.pool, {
        threadId,
        runId,
        attempt: 0,
        events: [
          { key: "infer:delta:0", event: "text.delta", data: { runId, stepId: "infer", attempt: 0, delta: runId } },
        ],
      });
    expect((await makeCurrent(threadId, resultId(messageId, 1, 0))).status).toBe(200);

    expect((await asUser(app, userId).delete(`/api/threads/${threadId}/messages/${variantAnswer}/branch`)).status).toBe(
      200,
    );

    const { rows } = await bed.db.pool.query<{ run_id: string }>(
      "SELECT DISTINCT run_id FROM thread_events WHERE thread_id = $1 AND run_id IS NOT NULL",
      [threadId],
    );
    expect(rows.map((row) => row.run_id)).toEqual([`run-${messageId}`]);
  });

  it("an approval a branch deletion left behind before approvals went with their branch is neither exported nor in the way of an import", async () => {
    const userId = `left-behind-${randomUUID()}`;
    const threadId = randomUUID();
    await storeAnsweredTurn(bed.db.pool, { threadId, userId, question: "Q?", answer: "A." });
    const gone = randomUUID();
    await bed.db.pool.query(
      `INSERT INTO tool_approvals (id, thread_id, run_id, message_id, tool_call_id, tool_name, arguments, expires_at)
       VALUES ($1, $2, $3, $4, 'call_dice', 'roll_dice', '{}', now() + interval '1 hour')`,
      [randomUUID(), threadId, `run-${gone}`, gone],
    );

    const exported = await (await asUser(app, userId).get("/api/export")).text();

    expect(exported).not.toContain('"type":"approval"');
    const target = await createTestDatabase();
    try {
      expect(
        await importUserData(
          target.pool,
          (async function* () {
            yield* exported.split("\n");
          })(),
        ),
      ).toMatchObject({ threads: 1, approvals: 0 });
    } finally {
      await target.drop();
    }
  });
});

describe("deleting a branch while a turn begins", () => {
  it("waits for the turn's begin, then refuses with 409 naming it, deleting nothing", async () => {
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, fourTurns);
    await editAndAnswer(threadId, messageIds[1]!, "Two, edited?", "2'");
    const before = await threadRows(bed.db.pool, threadId);

    // A new message's turn begins (its statement's transaction held open) as the deletion arrives.
    const begun = await bed.db.pool.connect();
    const runId = `run-${randomUUID()}`;
    try {
      await begun.query("BEGIN");
      await begun.query(
        "SELECT refusal FROM threadline_begin_turn($1, 'user-1', $2, 'Five?', NULL, $3, 'chat', NULL, NULL)",
        [threadId, randomUUID(), runId],
      );
      const deleting = asUser(app, "user-1").delete(`/api/threads/${threadId}/messages/${messageIds[1]!}/branch`);
      await expect
        .poll(
          async () =>
            (
              await bed.db.pool.query(
                "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE%'",
              )
            ).rowCount,
          { timeout: 10_000 },
        )
        .toBe(1);
      await begun.query("COMMIT");
      const response = await deleting;
      expect(response.status).toBe(409);
      expect(await response.json()).toMatchObject({ code: "thread_busy", error: expect.stringContaining(runId) });
    } finally {
      begun.release();
    }
    expect((await threadRows(bed.db.pool, threadId)).slice(0, before.length).map((r) => r.id)).toEqual(
      before.map((r) => r.id),
    );
  });
});

describe("every branch is searchable and exported", () => {
  it("search include=all finds the old branch's words, include=current only the shown branch's; the export holds both with their parents", async () => {
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, [
      ["Tell me about lighthouses", "They guide ships"],
      ["And about windmills", "They grind grain"],
    ]);
    const { messageId: edited } = await editAndAnswer(
      threadId,
      messageIds[1]!,
      "And about watermills",
      "They use rivers",
    );
    const hits = async (q: string, include: string) =>
      (
        (await (await asUser(app, "user-1").get(`/api/search?q=${q}&include=${include}`)).json()) as {
          results: { messageId: string; onPath: boolean }[];
        }
      ).results.map((hit) => [hit.messageId, hit.onPath]);
    expect(await hits("windmills", "current")).toEqual([]);
    expect(await hits("windmills", "all")).toEqual([[messageIds[1], false]]);
    expect(await hits("watermills", "current")).toEqual([[edited, true]]);

    const response = await asUser(app, "user-1").get("/api/export");
    const lines = (await response.text())
      .trim()
      .split("\n")
      .map(
        (line) =>
          JSON.parse(line) as { type: string; threadId?: string; id?: string; parentId?: string; onPath?: boolean },
      );
    const users = lines.filter((line) => line.type === "message" && line.threadId === threadId && "parentId" in line);
    expect(users.map((line) => [line.id, line.parentId, line.onPath])).toEqual([
      [messageIds[1], messageIds[0], false],
      [edited, messageIds[0], true],
    ]);
  });
});

describe("summaries follow the current path", () => {
  it("an edit drops a summary that covers the edited turn, a switch one that covers a changed turn; a summary before them stays", async () => {
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, fourTurns);
    const seqOf = async (id: string) =>
      Number((await bed.db.pool.query("SELECT seq FROM messages WHERE id = $1", [id])).rows[0].seq);
    const summarize = (coversThrough: number) =>
      bed.db.pool.query(
        "INSERT INTO thread_summaries (thread_id, covers_through_turn_seq, text) VALUES ($1, $2, 'so far') ON CONFLICT (thread_id) DO UPDATE SET covers_through_turn_seq = $2",
        [threadId, coversThrough],
      );
    const state = async () =>
      (
        await bed.db.pool.query(
          "SELECT t.path_version::int, s.covers_through_turn_seq::int AS covers FROM threads t LEFT JOIN thread_summaries s ON s.thread_id = t.id WHERE t.id = $1",
          [threadId],
        )
      ).rows[0] as { path_version: number; covers: number | null };

    await summarize(await seqOf(messageIds[2]!));
    const before = await state();
    const { messageId: edited } = await editAndAnswer(threadId, messageIds[1]!, "Two, edited?", "2'");
    expect(await state()).toEqual({ path_version: before.path_version + 1, covers: null });

    // A summary of the first turn only: the switch changes nothing it covers.
    await summarize(await seqOf(messageIds[0]!));
    expect((await makeCurrent(threadId, messageIds[1]!)).status).toBe(200);
    expect(await state()).toEqual({ path_version: before.path_version + 2, covers: await seqOf(messageIds[0]!) });
    // A summary reaching the old branch goes when the path leaves it.
    await summarize(await seqOf(messageIds[3]!));
    expect((await makeCurrent(threadId, edited)).status).toBe(200);
    expect(await state()).toEqual({ path_version: before.path_version + 3, covers: null });
  });
});
