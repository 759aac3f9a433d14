import { AgentResult, type Message } from "@inngest/agent-kit";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  agentContent,
  compactRow,
  expandRow,
  type HistoryRow,
  toAgentContent,
  toAgentResults,
} from "../src/history/messages.js";
import { sanitizeJson } from "../src/history/safe-text.js";

/*
 * history.get returns its rows as tuples (compactRow), and toAgentResults checks the common rows
 * by hand before the schemas: both must rebuild exactly what the row objects rebuild through the
 * schemas, and refuse what they refuse. Outputs memoized before the tuples hold row objects.
 */

const row = (kind: HistoryRow["kind"], content: unknown, extra: Partial<HistoryRow> = {}): HistoryRow => ({
  id: `${kind}-1`,
  kind,
  agentName: kind === "agent" ? "assistant" : kind,
  content,
  createdAt: 1_795_527_096_222,
  ...extra,
});
const text = (content: unknown, more: Record<string, unknown> = {}) => ({
  type: "text",
  role: "assistant",
  content,
  ...more,
});
const agent = (...output: unknown[]) => row("agent", { output, toolCalls: [] });

/** What a result rebuilds into, as AgentKit and the model see it. */
const rebuilt = (rows: Parameters<typeof toAgentResults>[0]) =>
  toAgentResults(rows).map((r) => ({ ...r.export(), createdAt: r.createdAt.getTime(), id: r.id }));
/** Through the schemas alone: an ISO date keeps a row off the hand-checked path. */
const throughSchemas = (rows: HistoryRow[]) =>
  rebuilt(rows.map((r) => ({ ...r, createdAt: new Date(r.createdAt as number).toISOString() })));
const viaJson = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

const toolCall = { type: "tool", id: "call-1", name: "current_time", input: {} };
const kept: HistoryRow[] = [
  row("user", { text: "What should I read next?", ignored: 1 }),
  row("system", { text: "Be brief." }),
  row("summary", { text: "They asked about ``` books." }),
  agent(text("Try Middlemarch.")),
  agent(text("Try Middlemarch.", { stop_reason: "stop", extra: true })),
  agent(text("One."), { type: "text", role: "system", content: "Two.", stop_reason: "tool" }),
  agent(text([{ type: "text", text: "In parts." }])),
  row("agent", {
    output: [{ type: "tool_call", role: "assistant", tools: [toolCall], stop_reason: "tool" }],
    toolCalls: [
      { type: "tool_result", role: "tool_result", tool: toolCall, content: { now: "noon" }, stop_reason: "tool" },
    ],
  }),
  row("user", { text: "Written before epoch milliseconds." }, { createdAt: "2026-05-01T12:00:00.000Z" }),
];
const refused: HistoryRow[] = [
  agent(text("NUL \u0000 inside")),
  agent(text("a lone \ud800 surrogate")),
  agent({ type: "text", role: "tool", content: "no such role" }),
  agent(text("odd stop", { stop_reason: "later" })),
  row("user", { text: 42 }),
  row("user", ["not", "an", "object"]),
  row("user", { text: "too late" }, { createdAt: 1e20 }),
  row("other" as HistoryRow["kind"], { text: "no such kind" }),
  row("agent", { output: [], toolCalls: null }),
];

describe("history rows", () => {
  it("rebuild the same results through the hand check, the schemas and the tuples", () => {
    const expected = throughSchemas(kept);
    expect(rebuilt(kept)).toEqual(expected);
    expect(rebuilt(viaJson(kept.map(compactRow)))).toEqual(expected);
    expect(
      viaJson(kept.map(compactRow))
        .map(expandRow)
        .map((r) => r.id),
    ).toEqual(kept.map((r) => r.id));
  });

  it("are refused alike as objects and as tuples", () => {
    for (const bad of refused) {
      expect(() => toAgentResults([bad])).toThrow();
      expect(() => toAgentResults(viaJson([compactRow(bad)]))).toThrow();
    }
  });

  it("are shorter as tuples, and a plain text answer is a string", () => {
    const answer = agent(text("Try Middlemarch.", { stop_reason: "stop" }));
    expect(compactRow(answer)).toEqual([
      "agent",
      "agent-1",
      "assistant",
      1_795_527_096_222,
      "Try Middlemarch.",
      "stop",
    ]);
    expect(JSON.stringify(kept.map(compactRow)).length).toBeLessThan(JSON.stringify(kept).length * 0.8);
  });

  it("round-trip any text, kind and stop reason", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("user", "system", "summary", "agent"),
        fc.string({ unit: "grapheme-composite", maxLength: 60 }),
        fc.constantFrom(undefined, "stop", "tool"),
        (kind, words, stop) => {
          const original =
            kind === "agent"
              ? agent(text(words, stop === undefined ? {} : { stop_reason: stop }))
              : row(kind as HistoryRow["kind"], { text: words });
          expect(rebuilt(viaJson([compactRow(original)]))).toEqual(throughSchemas([original]));
        },
      ),
    );
  });
});

describe("an answer's stored content", () => {
  /** What the schema path stores: the result through JSON, sanitized, parsed. */
  const throughSchema = (result: AgentResult) =>
    agentContent.parse(
      sanitizeJson(JSON.parse(JSON.stringify({ output: result.output, toolCalls: result.toolCalls }))),
    );
  const answer = (...output: unknown[]) => new AgentResult("assistant", output as Message[], [], new Date());

  it("is what the schema stores, for text answers built directly and any other through the schema", () => {
    const answers = [
      answer(text("Try Middlemarch.", { stop_reason: "stop", extra: 1 })),
      answer(text("NUL \u0000 and a lone \ud800 surrogate", { stop_reason: undefined })),
      answer(text("One."), { type: "text", role: "system", content: "Two.", stop_reason: "tool" }),
      answer(),
      answer(text([{ type: "text", text: "In parts." }])),
      answer({ type: "tool_call", role: "assistant", tools: [toolCall], stop_reason: "tool" }),
    ];
    for (const result of answers) expect(toAgentContent(result)).toEqual(throughSchema(result));
    expect(toAgentContent(answers[1]!).output[0]!).toMatchObject({ content: "NUL \ufffd and a lone \ufffd surrogate" });
    for (const bad of [answer(text("odd stop", { stop_reason: "later" })), answer(text("x", { role: "tool" }))])
      expect(() => toAgentContent(bad)).toThrow();
  });

  it("is what the schema stores for any text", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: "binary", maxLength: 40 }),
        fc.constantFrom(undefined, "stop", "tool"),
        (words, stop) => {
          const result = answer(text(words, stop === undefined ? {} : { stop_reason: stop }));
          expect(toAgentContent(result)).toEqual(throughSchema(result));
        },
      ),
    );
  });
});
