import { Tiktoken } from "js-tiktoken/lite";
import o200kBase from "js-tiktoken/ranks/o200k_base";
import { jsonBytes } from "../../inngest.config.js";
import { agentContent, textContent, textOf, type AgentContent, type HistoryRow } from "./messages.js";

/**
 * The budgets of a turn's earlier history: tokens (what the model is sent) and bytes (what the
 * history.get step returns, which Inngest stores as the step's output).
 *
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
 * - if not even the most recent turn fits, its longest messages are cut to fit (each to an equal
 *   share of the room), ending with TRUNCATION_MARKER, rather than the model losing the turn or
 *   receiving it whole.
 *
 * The byte budget works the same way on the UTF-8 bytes of each row's JSON, so the step's output
 * stays under a fixed size whatever the message sizes (see DEFAULT_HISTORY_MAXIMUMS.maxBytes); a
 * turn cut to fit carries the same marker, counting the characters cut off.
 * Imports: js-tiktoken, messages.ts and jsonBytes (inngest.config.ts). Stores nothing.
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

/** What the byte budget reports; `truncated` counts omitted characters (UTF-16 units), as its marker does. */
export type ByteBudgetReport = {
  maxBytes: number;
  /** UTF-8 bytes of the JSON of the rows that are sent. */
  bytes: number;
  droppedRows: number;
  truncated: { id: string; omittedCharacters: number }[];
};

/**
 * js-tiktoken merges the pairs of one pre-tokenized piece in quadratic time: a long run without
 * whitespace (32,000 repeated letters, a CJK paragraph, base64) takes minutes as one piece. Such
 * runs are encoded in chunks of LONG_RUN_CHUNK code points instead: the tokens still decode to the
 * same text, and the count is at most a token or two per chunk above the exact one.
 */
const LONG_RUN = /\S{65,}/gu;
const LONG_RUN_CHUNK = 64;

function encode(text: string): number[] {
  const tokens: number[] = [];
  let from = 0;
  for (const run of text.matchAll(LONG_RUN)) {
    if (run.index > from) tokens.push(...encoding().encode(text.slice(from, run.index)));
    const points = Array.from(run[0]);
    for (let i = 0; i < points.length; i += LONG_RUN_CHUNK)
      tokens.push(...encoding().encode(points.slice(i, i + LONG_RUN_CHUNK).join("")));
    from = run.index + run[0].length;
  }
  if (from < text.length) tokens.push(...encoding().encode(text.slice(from)));
  return tokens;
}

export const countTokens = (text: string): number => encode(text).length;

const truncationMarker = (omitted: number, unit: "tokens" | "characters" = "tokens") =>
  `\n[… truncated by Threadline: ${omitted} ${unit} omitted]`;

/**
 * How a budget measures history: a row's cost, a text's cost inside its row, and the longest
 * start of a text that fits `room` with the truncation marker appended.
 */
type Measure = {
  rowCost: (row: HistoryRow) => number;
  textCost: (text: string) => number;
  cut: (text: string, room: number) => { text: string; omitted: number } | undefined;
};

const tokenMeasure: Measure = {
  rowCost: rowTokens,
  textCost: countTokens,
  cut: (text, available) => {
    const tokens = encode(text);
    // The marker's own length depends on the number it prints: reserve room for the longest one.
    const room = available - countTokens(truncationMarker(tokens.length));
    if (room < 1) return undefined;
    const omitted = tokens.length - room;
    return { text: encoding().decode(tokens.slice(0, room)) + truncationMarker(omitted), omitted };
  },
};

const byteMeasure: Measure = {
  // The comma that separates rows in the step's JSON counted too.
  rowCost: (row) => jsonBytes(row) + 1,
  textCost: jsonBytes,
  cut: (text, available) => {
    // Characters, not tokens: the byte budget applies on every turn and must not need the tokenizer.
    const room = available - jsonBytes(truncationMarker(text.length, "characters"));
    const end = fittingPrefixEnd(text, room);
    if (end < 1 || end >= text.length) return undefined;
    const omitted = text.length - end;
    return { text: text.slice(0, end) + truncationMarker(omitted, "characters"), omitted };
  },
};

/** The end of the longest start of `text` whose JSON string (quotes included) takes at most `room` bytes. */
function fittingPrefixEnd(text: string, room: number): number {
  let used = 2;
  let end = 0;
  for (const character of text) {
    used += escapedBytes(character);
    if (used > room) break;
    end += character.length;
  }
  return end;
}

/** UTF-8 bytes of one code point as JSON.stringify writes it inside a string. */
function escapedBytes(character: string): number {
  const code = character.codePointAt(0)!;
  if (character === '"' || character === "\\") return 2;
  if (code < 0x20) return "\b\f\n\r\t".includes(character) ? 2 : 6;
  if (code < 0x80) return 1;
  if (code < 0x800) return 2;
  // A lone surrogate is written as a \uXXXX escape.
  if (code >= 0xd800 && code <= 0xdfff) return 6;
  return code < 0x10000 ? 3 : 4;
}

export function applyTokenBudget(
  rows: readonly HistoryRow[],
  maxTokens: number,
): { rows: HistoryRow[]; report: BudgetReport } {
  const { kept, used, truncated } = applyBudget(rows, maxTokens, tokenMeasure);
  const cuts = truncated.map(({ id, omitted }) => ({ id, omittedTokens: omitted }));
  return { rows: kept, report: { maxTokens, tokens: used, droppedRows: rows.length - kept.length, truncated: cuts } };
}

export function applyByteBudget(
  rows: readonly HistoryRow[],
  maxBytes: number,
): { rows: HistoryRow[]; report: ByteBudgetReport } {
  // The rows' costs (each row's JSON and its comma) sum to the array's JSON less its brackets and
  // one comma: when that fits, every row is kept, measured in one pass rather than row by row.
  const whole = rows.length > 0 ? jsonBytes(rows) - 1 : 0;
  if (whole <= maxBytes) return { rows: [...rows], report: { maxBytes, bytes: whole, droppedRows: 0, truncated: [] } };
  const { kept, used, truncated } = applyBudget(rows, maxBytes, byteMeasure);
  const cuts = truncated.map(({ id, omitted }) => ({ id, omittedCharacters: omitted }));
  return { rows: kept, report: { maxBytes, bytes: used, droppedRows: rows.length - kept.length, truncated: cuts } };
}

/**
 * Both budgets, bytes first (cheap to measure, and it bounds what the tokenizer reads); null
 * maxTokens: no token budget. A token is at least one byte and a row's JSON holds every byte of
 * its texts and more, so rows of fewer bytes than maxTokens cannot exceed it: they are not
 * tokenized (no token report), which spares the tokenizer on every turn under the defaults.
 */
export function applyHistoryBudgets(
  rows: readonly HistoryRow[],
  limits: { maxBytes: number; maxTokens: number | null },
): { rows: HistoryRow[]; bytes: ByteBudgetReport; budget?: BudgetReport } {
  const bytes = applyByteBudget(rows, limits.maxBytes);
  if (limits.maxTokens === null || bytes.report.bytes <= limits.maxTokens)
    return { rows: bytes.rows, bytes: bytes.report };
  const tokens = applyTokenBudget(bytes.rows, limits.maxTokens);
  return { rows: tokens.rows, bytes: bytes.report, budget: tokens.report };
}

type Unit = { rows: HistoryRow[]; pinned: boolean; cost: number; index: number };
/** A row whose text was cut, and how much was cut off (in the measure's marker unit). */
type Cut = { id: string; omitted: number };

function applyBudget(rows: readonly HistoryRow[], limit: number, measure: Measure) {
  const units = toUnits(rows, measure);
  const kept = new Map<number, HistoryRow[]>();
  const truncated: Cut[] = [];
  let left = limit;

  for (const unit of units.filter((u) => u.pinned).reverse()) {
    if (unit.cost > left) continue;
    kept.set(unit.index, unit.rows);
    left -= unit.cost;
  }
  let keptTurns = 0;
  for (const unit of units.filter((u) => !u.pinned).reverse()) {
    if (unit.cost <= left) {
      kept.set(unit.index, unit.rows);
      left -= unit.cost;
      keptTurns += 1;
      continue;
    }
    const cut = keptTurns === 0 ? truncateUnit(unit, left, measure) : undefined;
    if (cut) {
      kept.set(unit.index, cut.rows);
      left -= cut.cost;
      truncated.push(...cut.truncated);
    }
    break;
  }

  return {
    kept: units.filter((u) => kept.has(u.index)).flatMap((u) => kept.get(u.index)!),
    used: limit - left,
    truncated,
  };
}

/** Groups rows into what is kept or dropped together: a turn, or one system/summary row. */
function toUnits(rows: readonly HistoryRow[], measure: Measure): Unit[] {
  const units: Unit[] = [];
  let turn: Unit | undefined;
  for (const row of rows) {
    const cost = measure.rowCost(row);
    if (row.kind === "system" || row.kind === "summary") {
      units.push({ rows: [row], pinned: true, cost, index: units.length });
    } else if (row.kind === "user" || !turn) {
      turn = { rows: [row], pinned: false, cost, index: units.length };
      units.push(turn);
    } else {
      turn.rows.push(row);
      turn.cost += cost;
    }
  }
  return units;
}

function rowTokens(row: HistoryRow): number {
  if (row.kind !== "agent") return MESSAGE_OVERHEAD + countTokens(textContent.parse(row.content).text);
  const { output, toolCalls } = agentContent.parse(row.content);
  return [...output, ...toolCalls].reduce(
    (sum, message) => sum + MESSAGE_OVERHEAD + countTokens(messageText(message)),
    0,
  );
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
type TextSlot = { row: number; output?: number; text: string; cost: number };

/**
 * Cuts the turn's longest texts so the turn fits in `available`, if that is enough: every text
 * longer than an equal share of the room is cut to that share (shorter ones stay whole), so a
 * question and its answer both keep their beginnings.
 */
function truncateUnit(
  unit: Unit,
  available: number,
  measure: Measure,
): { rows: HistoryRow[]; cost: number; truncated: Cut[] } | undefined {
  const slots: TextSlot[] = unit.rows.flatMap((row, index): TextSlot[] => {
    if (row.kind !== "agent") {
      const { text } = textContent.parse(row.content);
      return [{ row: index, text, cost: measure.textCost(text) }];
    }
    return agentContent.parse(row.content).output.flatMap((message, output) => {
      if (message.type !== "text") return [];
      const text = messageText(message);
      return [{ row: index, output, text, cost: measure.textCost(text) }];
    });
  });
  const fixed = unit.cost - slots.reduce((sum, slot) => sum + slot.cost, 0);
  const share = equalShare(
    slots.map((slot) => slot.cost),
    available - fixed,
  );
  if (share === undefined) return undefined;

  const rows = [...unit.rows];
  const truncated: Cut[] = [];
  let cost = fixed;
  for (const slot of slots) {
    if (slot.cost <= share) {
      cost += slot.cost;
      continue;
    }
    const cut = measure.cut(slot.text, share);
    if (!cut) return undefined;
    rows[slot.row] = withText(rows[slot.row]!, slot.output, cut.text);
    cost += measure.textCost(cut.text);
    truncated.push({ id: rows[slot.row]!.id, omitted: cut.omitted });
  }
  return { rows, cost, truncated };
}

/** The largest share such that the costs, each held to it, sum to at most `room`; undefined: all fit. */
function equalShare(costs: number[], room: number): number | undefined {
  const ascending = [...costs].sort((a, b) => a - b);
  let left = room;
  for (const [index, cost] of ascending.entries()) {
    const share = Math.floor(left / (ascending.length - index));
    if (cost > share) return share;
    left -= cost;
  }
  return undefined;
}

function withText(row: HistoryRow, output: number | undefined, text: string): HistoryRow {
  if (output === undefined) return { ...row, content: { text } };
  const content = agentContent.parse(row.content);
  return {
    ...row,
    content: {
      ...content,
      output: content.output.map((message, i) =>
        i === output && message.type === "text" ? { ...message, content: text } : message,
      ),
    },
  };
}
