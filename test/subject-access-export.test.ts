import { randomUUID } from "node:crypto";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordUsage } from "../src/history/usage.js";
import { createEventRetention } from "../src/functions/event-retention.js";
import { createEventNotifier } from "../src/stream/notifier.js";
import type pg from "pg";
import { importCommand } from "../scripts/import.js";
import { ASSISTANT_NAME } from "../src/agents/assistant.js";
import { exportLine } from "../src/api/export.js";
import { insertApiKey } from "../src/auth/api-key-store.js";
import { decideApproval, requestApproval } from "../src/history/approvals.js";
import { appendEvents } from "../src/history/events.js";
import { putFeedback } from "../src/history/feedback.js";
import { EXPORT_FORMAT, EXPORT_VERSION } from "../src/history/export-format.js";
import { resultId } from "../src/history/ids.js";
import { importUserData, ImportRefused } from "../src/history/import.js";
import { beginTurn, storeAnswer } from "../src/history/store.js";
import { failTurn, stopRunningTurn } from "../src/history/turns.js";
import { remember, rememberFromThread } from "../src/history/memories.js";
import { createTestDatabase, type TestDatabase } from "./helpers/database.js";
import { execute } from "./helpers/engine.js";
import { createTestApp, headersFor } from "./helpers/http.js";
import { openEventStream } from "./helpers/sse.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();
let target: TestDatabase;
beforeAll(async () => {
  target = await createTestDatabase();
});
afterAll(async () => {
  await target?.drop();
});

const USER = "subject";
const APPROVAL_ID = randomUUID();
type Line = ReturnType<typeof exportLine.parse>;

const answerOf = (text: string) => ({
  output: [{ type: "text" as const, role: "assistant" as const, content: text }],
  toolCalls: [],
});

/**
 * A user whose thread has: a first answer replaced by a regenerate (two variants), a failed turn,
 * a turn the user stopped mid-answer (a stopped partial answer), a summary and agent state; a
 * remembered and an extracted memory; an API key. Another user has a thread of their own.
 */
async function seedSubject(db: pg.Pool) {
  const threadId = randomUUID();
  const first = randomUUID();
  const start = await beginTurn(db, {
    threadId,
    userId: USER,
    message: { id: first, text: "What is a durable step?" },
    turn: { runId: `run-${first}`, kind: "chat" },
  });
  // The first turn asked to roll dice; the user denied it, saying why.
  await requestApproval(db, {
    approvalId: APPROVAL_ID,
    runId: `run-${first}`,
    toolCallId: "call_dice",
    toolName: "roll_dice",
    arguments: { sides: 20 },
    expiresInSeconds: 600,
  });
  await decideApproval(db, {
    threadId,
    userId: USER,
    approvalId: APPROVAL_ID,
    decision: "deny",
    reason: "no gambling",
  });
  await storeAnswer(db, {
    threadId,
    userId: USER,
    runId: `run-${first}`,
    messageId: first,
    messageSeq: start.messageSeq,
    variant: start.variant,
    detachLaterTurns: false,
    results: [
      { id: resultId(first, start.variant, 0), agentName: ASSISTANT_NAME, content: answerOf("the first answer") },
    ],
  });
  const regen = await beginTurn(db, {
    threadId,
    userId: USER,
    message: { id: first, text: "What is a durable step?" },
    turn: { runId: `regen-${first}`, kind: "regenerate" },
  });
  await storeAnswer(db, {
    threadId,
    userId: USER,
    runId: `regen-${first}`,
    messageId: first,
    messageSeq: regen.messageSeq,
    variant: regen.variant,
    detachLaterTurns: true,
    results: [
      { id: resultId(first, regen.variant, 0), agentName: ASSISTANT_NAME, content: answerOf("the regenerated answer") },
    ],
  });

  // The replaced answer keeps the user's rating; the current one is rated too.
  await putFeedback(db, {
    threadId,
    answerId: resultId(first, start.variant, 0),
    userId: USER,
    rating: "down",
    comment: "too vague",
  });
  await putFeedback(db, {
    threadId,
    answerId: resultId(first, regen.variant, 0),
    userId: USER,
    rating: "up",
    comment: null,
  });

  const failing = randomUUID();
  await beginTurn(db, {
    threadId,
    userId: USER,
    message: { id: failing, text: "And a failing one?" },
    turn: { runId: `run-${failing}`, kind: "chat" },
  });
  await failTurn(db, `run-${failing}`, "The model provider answered 500: upstream overloaded");

  const stopped = randomUUID();
  await beginTurn(db, {
    threadId,
    userId: USER,
    message: { id: stopped, text: "Write me a long story" },
    turn: { runId: `run-${stopped}`, kind: "chat" },
  });
  await appendEvents(db, {
    threadId,
    runId: `run-${stopped}`,
    attempt: 0,
    events: [
      {
        key: "infer:delta:0",
        event: "text.delta",
        data: { runId: `run-${stopped}`, stepId: "infer", attempt: 0, delta: "Once upon a" },
      },
    ],
  });
  await stopRunningTurn(db, { threadId, userId: USER, agentName: ASSISTANT_NAME });

  await db.query(
    "INSERT INTO thread_summaries (thread_id, covers_through_turn_seq, text) VALUES ($1, 1, 'The user asked about durable steps.')",
    [threadId],
  );
  await db.query(`INSERT INTO agent_thread_state (thread_id, agent_name, data) VALUES ($1, $2, '{"mood":"curious"}')`, [
    threadId,
    ASSISTANT_NAME,
  ]);
  await remember(db, { userId: USER, threadId, text: "Prefers short answers" });
  await rememberFromThread(db, { userId: USER, threadId, messageId: threadId, text: "Is learning Inngest" });
  await insertApiKey(db, {
    id: `key_${randomUUID().slice(0, 8)}`,
    userId: USER,
    name: "laptop",
    secretHash: Buffer.from("not-exported"),
  });

  const other = randomUUID();
  await beginTurn(db, {
    threadId: other,
    userId: "someone-else",
    message: { id: other, text: "not the subject's" },
    turn: { runId: `run-${other}`, kind: "chat" },
  });
  await remember(db, { userId: "someone-else", threadId: other, text: "someone else's memory" });
  // The first turn's model call, as its inference step records it (a billed failed attempt beside it).
  for (const [attempt, failed] of [
    [0, true],
    [1, false],
  ] as const)
    await recordUsage(db, {
      key: `run-${first}:assistant:${attempt}`,
      userId: USER,
      threadId,
      messageId: first,
      runId: `run-${first}`,
      stepId: "assistant",
      attempt,
      provider: "openai",
      model: "gpt-4o-mini",
      inputTokens: 1_000,
      outputTokens: 200,
      cachedTokens: 100,
      reasoningTokens: null,
      latencyMs: 850,
      costUsd: 0.00027,
      failed,
    });
  return { threadId, first, failing, stopped, variants: [start.variant, regen.variant] };
}

async function exportOf(db: pg.Pool, userId: string): Promise<string> {
  const { app } = createTestApp(db);
  const response = await app.request("/api/export", { headers: await headersFor(userId) });
  expect(response.status).toBe(200);
  return response.text();
}

const linesOf = (text: string): Line[] =>
  text
    .trimEnd()
    .split("\n")
    .map((line) => exportLine.parse(JSON.parse(line)));

async function* each(text: string) {
  yield* text.split("\n");
}

/** Everything stored about the user, table by table, in a comparable form (times to the millisecond). */
async function storedAbout(db: pg.Pool, userId: string) {
  const rows = async (query: string) => (await db.query(query, [userId])).rows;
  const ms = (column: string) =>
    `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS') AS ${column.split(".").at(-1)}`;
  return {
    threads: await rows(
      `SELECT id, title, title_source, metadata, message_count, last_seq, ${ms("last_message_at")}, ${ms("last_activity_at")}, ${ms("created_at")} FROM threads WHERE user_id = $1 ORDER BY id`,
    ),
    messages: await rows(
      `SELECT id, thread_id, seq, turn_seq, kind, agent_name, content, answers, variant, position, on_path, stopped, parent_id, parent_variant, ${ms("created_at")} FROM messages WHERE user_id = $1 ORDER BY thread_id, seq`,
    ),
    turns: await rows(
      `SELECT u.run_id, u.message_id, u.kind, u.variant, u.status, u.error, u.event_id, u.context, ${ms("u.started_at")}, ${ms("u.finished_at")} FROM turns u JOIN threads t ON t.id = u.thread_id WHERE t.user_id = $1 ORDER BY u.run_id`,
    ),
    summaries: await rows(
      `SELECT s.thread_id, s.covers_through_turn_seq, s.text FROM thread_summaries s JOIN threads t ON t.id = s.thread_id WHERE t.user_id = $1`,
    ),
    agentState: await rows(
      `SELECT a.thread_id, a.agent_name, a.data FROM agent_thread_state a JOIN threads t ON t.id = a.thread_id WHERE t.user_id = $1`,
    ),
    events: await rows(
      `SELECT e.thread_id, e.id, e.run_id, e.attempt, e.key, e.event, e.data, e.frame, e.frame_offset FROM thread_events e JOIN threads t ON t.id = e.thread_id WHERE t.user_id = $1 ORDER BY e.thread_id, e.id`,
    ),
    eventCounters: await rows(
      `SELECT c.thread_id, c.last_id, c.frame_bytes FROM thread_event_counters c JOIN threads t ON t.id = c.thread_id WHERE t.user_id = $1`,
    ),
    memories: await rows(
      `SELECT id, text, source, thread_id, ${ms("created_at")}, ${ms("updated_at")} FROM user_memories WHERE user_id = $1 ORDER BY id`,
    ),
    feedback: await rows(
      `SELECT message_id, thread_id, rating, comment, ${ms("created_at")}, ${ms("updated_at")} FROM message_feedback WHERE user_id = $1 ORDER BY message_id`,
    ),
    approvals: await rows(
      `SELECT a.id, a.thread_id, a.run_id, a.message_id, a.tool_call_id, a.tool_name, a.arguments, a.status, a.decided_by, a.reason, a.request_id, ${ms("a.requested_at")}, ${ms("a.expires_at")}, ${ms("a.decided_at")} FROM tool_approvals a JOIN threads t ON t.id = a.thread_id WHERE t.user_id = $1 ORDER BY a.id`,
    ),
    usage: await rows(
      `SELECT key, thread_id, message_id, variant, run_id, step_id, attempt, provider, model, input_tokens, output_tokens, cached_tokens, reasoning_tokens, latency_ms, cost_usd, failed, ${ms("created_at")} FROM usage_records WHERE user_id = $1 ORDER BY key`,
    ),
  };
}

/** A user's thread with one answered turn (seeded as the turn writes it). */
async function answeredThread(db: pg.Pool, userId: string) {
  const threadId = randomUUID();
  const first = randomUUID();
  const start = await beginTurn(db, {
    threadId,
    userId,
    message: { id: first, text: "Roll a die" },
    turn: { runId: `run-${first}`, kind: "chat" },
  });
  await storeAnswer(db, {
    threadId,
    userId,
    runId: `run-${first}`,
    messageId: first,
    messageSeq: start.messageSeq,
    variant: start.variant,
    detachLaterTurns: false,
    results: [{ id: resultId(first, start.variant, 0), agentName: ASSISTANT_NAME, content: answerOf("a four") }],
  });
  return { threadId, first, answerId: resultId(first, start.variant, 0) };
}

/** The export with `from` replaced by `to` in the first line of `type` holding it; and that line's number. */
function tampered(text: string, type: string, from: string, to: string) {
  const lines = text.split("\n");
  const index = lines.findIndex((line) => line.startsWith(`{"type":"${type}"`) && line.includes(from));
  lines[index] = lines[index]!.replace(from, to);
  return { text: lines.join("\n"), line: index + 1 };
}

describe("the subject-access export", () => {
  it("holds everything stored about the caller: all variants, stopped and failed turns with causes, tool approvals, summary, agent state, memories, event log, API keys", async () => {
    const { threadId, first, failing, stopped, variants } = await seedSubject(bed.db.pool);
    const lines = linesOf(await exportOf(bed.db.pool, USER));

    expect(lines[0]).toMatchObject({ type: "export", format: EXPORT_FORMAT, version: EXPORT_VERSION, userId: USER });
    expect(lines.filter((line) => line.type === "thread").map((line) => line.id)).toEqual([threadId]);
    const messages = lines.filter((line) => line.type === "message");
    const answers = messages.filter((message) => message.answers === first);
    expect(
      answers.map((answer) => [
        answer.variant,
        answer.onPath,
        (answer.content as { output: { content: string }[] }).output[0]!.content,
      ]),
    ).toEqual([
      [1, false, "the first answer"],
      [2, true, "the regenerated answer"],
    ]);
    expect(messages.find((message) => message.answers === stopped)).toMatchObject({
      stopped: true,
      onPath: true,
      content: expect.objectContaining({ output: [expect.objectContaining({ content: "Once upon a" })] }),
    });
    expect(messages.filter((message) => message.role === "user").map((message) => message.id)).toEqual([
      first,
      failing,
      stopped,
    ]);
    const turns = lines.filter((line) => line.type === "turn");
    expect(turns.map((turn) => [turn.messageId, turn.kind, turn.status])).toEqual([
      [first, "chat", "completed"],
      [first, "regenerate", "completed"],
      [failing, "chat", "failed"],
      [stopped, "chat", "stopped"],
    ]);
    expect(turns.find((turn) => turn.status === "failed")!.error).toBe(
      "The model provider answered 500: upstream overloaded",
    );
    expect(lines.filter((line) => line.type === "summary")).toEqual([
      expect.objectContaining({ threadId, text: "The user asked about durable steps." }),
    ]);
    expect(lines.filter((line) => line.type === "agent_state")).toEqual([
      expect.objectContaining({ threadId, agentName: ASSISTANT_NAME, data: { mood: "curious" } }),
    ]);
    expect(lines.filter((line) => line.type === "event").map((line) => line.event)).toEqual(
      expect.arrayContaining(["text.delta", "turn.stopped", "stream.ended"]),
    );
    expect(
      lines
        .filter((line) => line.type === "memory")
        .map((line) => [line.source, line.text])
        .sort(),
    ).toEqual([
      ["extracted", "Is learning Inngest"],
      ["remembered", "Prefers short answers"],
    ]);
    expect(
      lines
        .filter((line) => line.type === "feedback")
        .map((line) => [line.threadId, line.answerId, line.rating, line.comment])
        .sort(),
    ).toEqual(
      [
        [threadId, resultId(first, variants[0]!, 0), "down", "too vague"],
        [threadId, resultId(first, variants[1]!, 0), "up", null],
      ].sort(),
    );
    // The tool call the user denied, with the reason they gave.
    expect(lines.filter((line) => line.type === "approval")).toEqual([
      expect.objectContaining({
        threadId,
        id: APPROVAL_ID,
        messageId: first,
        toolName: "roll_dice",
        arguments: { sides: 20 },
        status: "denied",
        decidedBy: "user",
        reason: "no gambling",
      }),
    ]);
    const keys = lines.filter((line) => line.type === "api_key");
    expect(keys).toEqual([expect.objectContaining({ name: "laptop", revokedAt: null })]);
    expect(JSON.stringify(keys)).not.toMatch(/hash|secret|not-exported/i);
    // Nothing of the other user's.
    expect(JSON.stringify(lines)).not.toMatch(/someone|not the subject's/);
    const stored = await storedAbout(bed.db.pool, USER);
    expect(lines.at(-1)).toEqual({
      type: "end",
      threads: 1,
      messages: stored.messages.length,
      turns: 4,
      summaries: 1,
      agentStates: 1,
      events: stored.events.length,
      memories: 2,
      apiKeys: 1,
      feedback: 2,
      approvals: 1,
      usageRecords: stored.usage.length,
    });
    // The usage ledger: every model call of the subject's turns.
    expect(lines.filter((line) => line.type === "usage")).toEqual([
      expect.objectContaining({ key: `run-${first}:assistant:0`, failed: true, inputTokens: 1_000, costUsd: 0.00027 }),
      expect.objectContaining({ key: `run-${first}:assistant:1`, failed: false, variant: 1, latencyMs: 850 }),
    ]);
  });

  it("imports into an empty database: threads, messages, turns, approvals, summary, agent state, event log, feedback and memories come back as they were", async () => {
    const text = await exportOf(bed.db.pool, USER);
    const restored = await importUserData(target.pool, each(text));
    expect(restored).toMatchObject({ userId: USER, threads: 1, turns: 4, memories: 2, feedback: 2 });

    expect(await storedAbout(target.pool, USER)).toEqual(await storedAbout(bed.db.pool, USER));
    // What the API shows of the thread is the same on both databases; a second export is the same file.
    const threadId = linesOf(text).find((line) => line.type === "thread")!.id;
    const shown = async (db: pg.Pool) => {
      const { app } = createTestApp(db);
      return (await app.request(`/api/threads/${threadId}/messages`, { headers: await headersFor(USER) })).json();
    };
    expect(await shown(target.pool)).toEqual(await shown(bed.db.pool));
    const approvals = async (db: pg.Pool) => {
      const { app } = createTestApp(db);
      return (await app.request(`/api/threads/${threadId}/approvals`, { headers: await headersFor(USER) })).json();
    };
    expect(await approvals(target.pool)).toEqual(await approvals(bed.db.pool));
    // API keys are not restored (the export holds no secrets): everything else exports alike.
    const comparable = (export_: string) =>
      export_
        .replace(/"exportedAt":"[^"]+"/, "")
        .replace(/^\{"type":"api_key".*\n/gm, "")
        .replace(/"apiKeys":\d+/, "");
    expect(comparable(await exportOf(target.pool, USER))).toBe(comparable(text));
  });

  it("refuses, writing nothing, another format or version, a file cut short, and ids already present; takes a file an editor saved again", async () => {
    const scratch = await createTestDatabase();
    try {
      const text = await exportOf(bed.db.pool, USER);
      const count = async () =>
        (
          await scratch.pool.query<{ n: number }>(
            "SELECT (SELECT count(*) FROM threads) + (SELECT count(*) FROM messages) + (SELECT count(*) FROM user_memories) AS n",
          )
        ).rows[0]!.n;
      await expect(
        importUserData(scratch.pool, each(text.replace(`"version":${EXPORT_VERSION}`, '"version":1'))),
      ).rejects.toThrow(ImportRefused);
      // Saved again by an editor: a byte order mark, Windows line ends; read as the file it was.
      const edited = await importUserData(scratch.pool, each(`\uFEFF${text.replaceAll("\n", "\r\n")}`)).catch(
        (error: unknown) => error,
      );
      expect(edited).toMatchObject({ userId: USER });
      await scratch.pool.query("TRUNCATE threads, user_memories, usage_records CASCADE");
      const cut = text.trimEnd().split("\n").slice(0, -1).join("\n");
      await expect(importUserData(scratch.pool, each(cut))).rejects.toThrow(/cut short/);
      expect(Number(await count())).toBe(0);
      // The operator command reads the file line by line (npm run import -- <file>).
      const file = path.join(await mkdtemp(path.join(tmpdir(), "threadline-import-")), "export.jsonl");
      await writeFile(file, text);
      expect(await importCommand([file], scratch.pool)).toMatch(
        /^Restored user "subject": 1 threads, \d+ messages, 4 turns/,
      );
      const once = Number(await count());
      await expect(importUserData(scratch.pool, each(text))).rejects.toThrow(
        /line 2: duplicate key .* already holds rows of this export/,
      );
      expect(Number(await count())).toBe(once);
    } finally {
      await scratch.drop();
    }
  });
  it("refuses a tampered file naming the line and what is wrong, writing nothing: a bad value, a dangling id, a deleted thread", async () => {
    const user = `tampered-${randomUUID()}`;
    const { threadId, first } = await answeredThread(bed.db.pool, user);
    const text = await exportOf(bed.db.pool, user);
    const scratch = await createTestDatabase();
    try {
      const status = tampered(text, "turn", '"status":"completed"', '"status":"finished"');
      await expect(importUserData(scratch.pool, each(status.text))).rejects.toThrow(
        new RegExp(`^line ${status.line}: .*turns_status_check`),
      );
      const dangling = tampered(text, "turn", `"messageId":"${first}"`, `"messageId":"${randomUUID()}"`);
      const refusal = importUserData(scratch.pool, each(dangling.text));
      await expect(refusal).rejects.toThrow(ImportRefused);
      await expect(refusal).rejects.toThrow(
        new RegExp(`^line ${dangling.line}: turn.messageId names .*, not a user message of this file's thread`),
      );
      const { rows } = await scratch.pool.query("SELECT 1 FROM threads UNION ALL SELECT 1 FROM messages");
      expect(rows).toEqual([]);
    } finally {
      await scratch.drop();
    }
    // Deleted since the export: the thread is not restored (its tombstone refuses its id).
    await createTestApp(bed.db.pool).app.request(`/api/threads/${threadId}`, {
      method: "DELETE",
      headers: await headersFor(user),
    });
    const deleted = importUserData(bed.db.pool, each(text));
    await expect(deleted).rejects.toThrow(ImportRefused);
    await expect(deleted).rejects.toThrow(new RegExp(`^line 2: thread ${threadId} was deleted in this database`));
    expect((await bed.db.pool.query("SELECT 1 FROM messages WHERE thread_id = $1", [threadId])).rows).toEqual([]);
  });
  it("refuses a tampered file whose lines name another thread's rows (another user's answer, message or thread), writing nothing", async () => {
    const user = `tampered-${randomUUID()}`;
    const own = await answeredThread(bed.db.pool, user);
    await putFeedback(bed.db.pool, { ...own, userId: user, rating: "up", comment: null });
    await rememberFromThread(bed.db.pool, {
      userId: user,
      threadId: own.threadId,
      messageId: own.first,
      text: "Plays board games",
    });
    const text = await exportOf(bed.db.pool, user);
    const scratch = await createTestDatabase();
    try {
      // The other user's thread is in the database the file is restored into.
      await answeredThread(scratch.pool, "someone");
      const [elsewhere] = (
        await scratch.pool.query<{ id: string; answers: string; thread_id: string }>(
          "SELECT id, answers, thread_id FROM messages WHERE kind = 'agent'",
        )
      ).rows;
      for (const [type, from, to] of [
        ["feedback", own.answerId, elsewhere!.id],
        ["turn", `"messageId":"${own.first}"`, `"messageId":"${elsewhere!.answers}"`],
        ["message", `"answers":"${own.first}"`, `"answers":"${elsewhere!.answers}"`],
        ["memory", own.threadId, elsewhere!.thread_id],
      ] as const) {
        const edited = tampered(text, type, from, to);
        await expect(importUserData(scratch.pool, each(edited.text)), type).rejects.toThrow(
          new RegExp(`^line ${edited.line}: .* (names|of) .* not .*of this file`),
        );
      }
      const { rows } = await scratch.pool.query("SELECT 1 FROM message_feedback UNION ALL SELECT 1 FROM user_memories");
      expect(rows).toEqual([]);
      expect((await scratch.pool.query("SELECT 1 FROM threads")).rows).toHaveLength(1);
    } finally {
      await scratch.drop();
    }
  });
  it("restores how far each thread's event ids went, pruned events included: a stream resumed with its last id gets the next events", async () => {
    const user = `resumes-${randomUUID()}`;
    const { threadId } = await answeredThread(bed.db.pool, user);
    const note = (key: string) => ({
      key,
      event: "text.delta" as const,
      data: { partId: key, messageId: key, delta: key },
    });
    await appendEvents(bed.db.pool, { threadId, runId: "earlier", attempt: 0, events: [note("a"), note("b")] });
    const { rows } = await bed.db.pool.query<{ id: number }>(
      "SELECT max(id)::int AS id FROM thread_events WHERE thread_id = $1",
      [threadId],
    );
    const lastSeen = rows[0]!.id;
    // A day later the log is pruned: the export holds no event of the thread.
    await bed.db.pool.query("UPDATE thread_events SET created_at = now() - interval '2 days' WHERE thread_id = $1", [
      threadId,
    ]);
    await execute(createEventRetention({ db: bed.db.pool, eventRetentionHours: 24 }), {
      name: "inngest/scheduled.timer",
      data: {},
    });
    const text = await exportOf(bed.db.pool, user);
    expect(text).not.toContain('"type":"event"');

    const scratch = await createTestDatabase();
    const events = createEventNotifier(scratch.pool);
    try {
      await importUserData(scratch.pool, each(text));
      await appendEvents(scratch.pool, { threadId, runId: "next", attempt: 0, events: [note("c")] });
      const { app } = createTestApp(scratch.pool, { events });
      const stream = await openEventStream(app, threadId, { userId: user, lastEventId: lastSeen });
      try {
        await stream.waitFor(1);
        expect(stream.received.map((event) => [event.id, event.data.delta])).toEqual([[lastSeen + 1, "c"]]);
      } finally {
        await stream.close();
      }
    } finally {
      await events.close();
      await scratch.drop();
    }
  });
});
