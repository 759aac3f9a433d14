import { randomUUID } from "node:crypto";
import type pg from "pg";
import { ASSISTANT_NAME } from "../../src/agents/assistant.js";
import { resultId } from "../../src/history/ids.js";
import type { AgentContent } from "../../src/history/messages.js";
import { remember } from "../../src/history/memories.js";
import { beginTurn, ensureThread, storeAnswer } from "../../src/history/store.js";
import { transaction } from "../../src/history/transaction.js";

/**
 * One answered turn stored through the real storage code, as a chat turn stores it: the question,
 * then its answer under the id the turn would derive. The thread must exist or be the caller's to create.
 */
export async function storeAnsweredTurn(
  db: pg.Pool,
  { threadId, userId, question, answer }: { threadId: string; userId: string; question: string; answer: string },
): Promise<{ messageId: string; answerId: string }> {
  const messageId = randomUUID();
  const runId = `run-${messageId}`;
  const start = await beginTurn(db, {
    threadId,
    userId,
    message: { id: messageId, text: question },
    turn: { runId, kind: "chat" },
  });
  const answerId = resultId(messageId, start.variant, 0);
  await storeAnswer(db, {
    threadId,
    userId,
    runId,
    messageId,
    messageSeq: start.messageSeq,
    variant: start.variant,
    detachLaterTurns: false,
    results: [
      {
        id: answerId,
        agentName: ASSISTANT_NAME,
        content: { output: [{ type: "text", role: "assistant", content: answer }], toolCalls: [] },
      },
    ],
  });
  return { messageId, answerId };
}

/** One stored entry of a seeded thread, and the messages the model receives for it. */
export type SeededEntry =
  | { kind: "system"; text: string }
  | { kind: "turn"; index: number; question: string; toolCallId?: string; answer: string };

export type SeededThread = { threadId: string; userId: string; entries: SeededEntry[] };

/**
 * A thread stored through the real storage code: `turns` answered turns ("question i" →
 * "answer i"), the turns in `toolTurns` answering after a current_time tool call, and system
 * messages before the turns named in `systemBefore` (system rows have no writer yet, so they are
 * inserted as a later system-message writer would: next seq, turn_seq = own seq).
 */
export async function seedThread(
  db: pg.Pool,
  options: {
    turns: number;
    toolTurns?: number[];
    systemBefore?: number[];
    userId?: string;
    longQuestion?: { turn: number; text: string };
    /** Each turn's texts in place of "question i" / "answer i". */
    texts?: (turn: number) => { question: string; answer: string };
    /** A title, as title-thread gives a thread after its first turn (default: none). */
    title?: string;
  },
): Promise<SeededThread> {
  const userId = options.userId ?? "user-1";
  const threadId = randomUUID();
  await ensureThread(db, threadId, userId);
  if (options.title !== undefined)
    await db.query("UPDATE threads SET title = $2, title_source = 'model' WHERE id = $1", [threadId, options.title]);
  const entries: SeededEntry[] = [];
  for (let i = 1; i <= options.turns; i += 1) {
    if (options.systemBefore?.includes(i)) {
      const text = `System note before turn ${i}.`;
      await insertSystemMessage(db, threadId, text);
      entries.push({ kind: "system", text });
    }
    const messageId = randomUUID();
    const question =
      options.texts?.(i).question ?? (options.longQuestion?.turn === i ? options.longQuestion.text : `question ${i}`);
    const answer = options.texts?.(i).answer ?? `answer ${i}`;
    const start = await beginTurn(db, {
      threadId,
      userId,
      message: { id: messageId, text: question },
      turn: { runId: `seed-${messageId}`, kind: "chat" },
    });
    const toolCallId = options.toolTurns?.includes(i) ? `call_seed_${i}` : undefined;
    const contents: AgentContent[] = toolCallId
      ? [
          {
            output: [
              {
                type: "tool_call",
                role: "assistant",
                stop_reason: "tool",
                tools: [{ type: "tool", id: toolCallId, name: "current_time", input: {} }],
              },
            ],
            toolCalls: [
              {
                type: "tool_result",
                role: "tool_result",
                stop_reason: "tool",
                tool: { type: "tool", id: toolCallId, name: "current_time", input: {} },
                content: { data: { now: `2026-01-${String(i).padStart(2, "0")}T00:00:00.000Z` } },
              },
            ],
          },
          { output: [{ type: "text", role: "assistant", content: answer }], toolCalls: [] },
        ]
      : [{ output: [{ type: "text", role: "assistant", content: answer }], toolCalls: [] }];
    await storeAnswer(db, {
      threadId,
      userId,
      runId: `seed-${messageId}`,
      messageId,
      messageSeq: start.messageSeq,
      variant: start.variant,
      detachLaterTurns: false,
      results: contents.map((content, position) => ({
        id: resultId(messageId, start.variant, position),
        agentName: ASSISTANT_NAME,
        content,
      })),
    });
    entries.push({ kind: "turn", index: i, question, answer, ...(toolCallId ? { toolCallId } : {}) });
  }
  return { threadId, userId, entries };
}

async function insertSystemMessage(db: pg.Pool, threadId: string, text: string) {
  await transaction(db, async (client) => {
    const { rows } = await client.query<{ last_seq: string }>(
      "UPDATE threads SET last_seq = last_seq + 1 WHERE id = $1 RETURNING last_seq",
      [threadId],
    );
    const seq = Number(rows[0]!.last_seq);
    await client.query(
      "INSERT INTO messages (id, thread_id, seq, turn_seq, kind, agent_name, content) VALUES ($1, $2, $3, $3, 'system', 'system', $4)",
      [randomUUID(), threadId, seq, { text }],
    );
  });
}

/** The OpenAI chat messages the model receives for seeded entries, in order. */
export function expectedMessages(entries: SeededEntry[]): unknown[] {
  return entries.flatMap((entry) => {
    if (entry.kind === "system") return [{ role: "system", content: entry.text }];
    const toolMessages = entry.toolCallId
      ? [
          {
            role: "assistant",
            content: null,
            tool_calls: [
              { id: entry.toolCallId, type: "function", function: { name: "current_time", arguments: "{}" } },
            ],
          },
          {
            role: "tool",
            tool_call_id: entry.toolCallId,
            content: JSON.stringify({ data: { now: `2026-01-${String(entry.index).padStart(2, "0")}T00:00:00.000Z` } }),
          },
        ]
      : [];
    return [{ role: "user", content: entry.question }, ...toolMessages, { role: "assistant", content: entry.answer }];
  });
}

/** The entries of turns first..last (1-based, inclusive) and the system notes between them. */
export function turnsBetween(entries: SeededEntry[], first: number, last: number): SeededEntry[] {
  const start = entries.findIndex((e) => e.kind === "turn" && e.index === first);
  const end = entries.findIndex((e) => e.kind === "turn" && e.index === last);
  return entries.slice(start, end + 1);
}

export const systemEntries = (entries: SeededEntry[]) => entries.filter((e) => e.kind === "system");

/** A fact the user had remembered, as the remember tool stores it: said in a thread of theirs, made for it. */
export async function rememberFact(db: pg.Pool, userId: string, text: string) {
  const threadId = randomUUID();
  await ensureThread(db, threadId, userId);
  return remember(db, { userId, threadId, text });
}
