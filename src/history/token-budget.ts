import { Tiktoken } from "js-tiktoken/lite";
import o200kBase from "js-tiktoken/ranks/o200k_base";
import { agentContent, textContent, textOf, type AgentContent, type HistoryRow } from "./messages.js";

/**
 * The token budget of a turn's earlier history (the rows the policy's window returned; the
 * current user message is outside it and always sent whole). Tokens are counted with o200k_base,
 * the encoding of current OpenAI models, shipped inside js-tiktoken: other providers' tokenizers
 * differ by a few percent, which a budget set with some headroom absorbs.
 *
 * What goes when the rows do not fit:
 * - system and summary rows (kept by preserveSystemMessages) are kept first, newest first;
 * - then whole turns (a user message with all of its agent results), newest first, until one
 *   does not fit: older turns go, so the model sees a contiguous recent part of the thread, and a
 *   tool call always arrives with its result (both live in the same agent result);
 * - if not even the most recent turn fits, its longest message is cut to fit, ending with
 *   TRUNCATION_MARKER, rather than the model losing the turn or receiving it whole.
 */
export type BudgetReport = {
  maxTokens: number;
  /** Tokens of the rows that are sent. */
  tokens: number;
  /** Rows left out, oldest turns first. */
  droppedRows: number;
  truncated: { id: string; omittedTokens: number }[];
};

/** Per-message framing tokens (role, separators), as OpenAI's token counting guide reckons them. */
const MESSAGE_OVERHEAD = 3;

let encoder: Tiktoken | undefined;
const encoding = () => (encoder ??= new Tiktoken(o200kBase));

export const countTokens = (text: string): number => encoding().encode(text).length;

export const truncationMarker = (omittedTokens: number) => `\n[… truncated by Threadline: ${omittedTokens} tokens omitted]`;

type Unit = { rows: HistoryRow[]; pinned: boolean; tokens: number; index: number };

export function applyTokenBudget(rows: readonly HistoryRow[], maxTokens: number): { rows: HistoryRow[]; report: BudgetReport } {
  const units = toUnits(rows);
  const kept = new Map<number, HistoryRow[]>();
  const truncated: BudgetReport["truncated"] = [];
  let left = maxTokens;

  for (const unit of units.filter((u) => u.pinned).reverse()) {
    if (unit.tokens > left) continue;
    kept.set(unit.index, unit.rows);
    left -= unit.tokens;
  }
  let keptTurns = 0;
  for (const unit of units.filter((u) => !u.pinned).reverse()) {
    if (unit.tokens <= left) {
      kept.set(unit.index, unit.rows);
      left -= unit.tokens;
      keptTurns += 1;
      continue;
    }
    const cut = keptTurns === 0 ? truncateUnit(unit, left) : undefined;
    if (cut) {
      kept.set(unit.index, cut.rows);
      left -= cut.tokens;
      truncated.push(cut.truncated);
    }
    break;
  }

  const result = units.filter((u) => kept.has(u.index)).flatMap((u) => kept.get(u.index)!);
  return {
    rows: result,
    report: { maxTokens, tokens: maxTokens - left, droppedRows: rows.length - result.length, truncated },
  };
}

/** Groups rows into what is kept or dropped together: a turn, or one system/summary row. */
function toUnits(rows: readonly HistoryRow[]): Unit[] {
  const units: Unit[] = [];
  let turn: Unit | undefined;
  for (const row of rows) {
    const tokens = rowTokens(row);
    if (row.kind === "system" || row.kind === "summary") {
      units.push({ rows: [row], pinned: true, tokens, index: units.length });
    } else if (row.kind === "user" || !turn) {
      turn = { rows: [row], pinned: false, tokens, index: units.length };
      units.push(turn);
    } else {
      turn.rows.push(row);
      turn.tokens += tokens;
    }
  }
  return units;
}

function rowTokens(row: HistoryRow): number {
  if (row.kind !== "agent") return MESSAGE_OVERHEAD + countTokens(textContent.parse(row.content).text);
  const { output, toolCalls } = agentContent.parse(row.content);
  return [...output, ...toolCalls].reduce((sum, message) => sum + MESSAGE_OVERHEAD + countTokens(messageText(message)), 0);
}

function messageText(message: AgentContent["output"][number]): string {
  switch (message.type) {
    case "text":
      return textOf(message.content);
    case "tool_call":
      return message.tools.map((tool) => tool.name + JSON.stringify(tool.input)).join("");
    case "tool_result":
      return typeof message.content === "string" ? message.content : JSON.stringify(message.content ?? null);
  }
}

/** Where a turn's text lives: a user row's text, or one text message of an agent result. */
type TextSlot = { row: number; output?: number; text: string; tokens: number };

/** Cuts the turn's longest text so the turn fits in `available` tokens, if that is enough. */
function truncateUnit(unit: Unit, available: number): { rows: HistoryRow[]; tokens: number; truncated: BudgetReport["truncated"][number] } | undefined {
  const slots: TextSlot[] = unit.rows.flatMap((row, index): TextSlot[] => {
    if (row.kind !== "agent") {
      const { text } = textContent.parse(row.content);
      return [{ row: index, text, tokens: countTokens(text) }];
    }
    return agentContent.parse(row.content).output.flatMap((message, output) => {
      if (message.type !== "text") return [];
      const text = messageText(message);
      return [{ row: index, output, text, tokens: countTokens(text) }];
    });
  });
  const longest = slots.reduce<TextSlot | undefined>((a, b) => (a && a.tokens >= b.tokens ? a : b), undefined);
  if (!longest) return undefined;
  const others = unit.tokens - longest.tokens;
  const tokens = encoding().encode(longest.text);
  // The marker's own length depends on the number it prints: reserve room for the longest one.
  const room = available - others - countTokens(truncationMarker(tokens.length));
  if (room < 1) return undefined;
  const omittedTokens = tokens.length - room;
  const text = encoding().decode(tokens.slice(0, room)) + truncationMarker(omittedTokens);

  const rows = unit.rows.map((row, index) => (index === longest.row ? withText(row, longest.output, text) : row));
  const target = unit.rows[longest.row]!;
  return {
    rows,
    tokens: others + countTokens(text),
    truncated: { id: target.id, omittedTokens },
  };
}

function withText(row: HistoryRow, output: number | undefined, text: string): HistoryRow {
  if (output === undefined) return { ...row, content: { text } };
  const content = agentContent.parse(row.content);
  return {
    ...row,
    content: { ...content, output: content.output.map((message, i) => (i === output && message.type === "text" ? { ...message, content: text } : message)) },
  };
}
