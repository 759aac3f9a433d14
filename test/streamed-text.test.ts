import { describe, expect, it } from "vitest";
import type { ThreadEvent } from "../src/history/events.js";
import { streamedTexts } from "../src/stream/deltas.js";

let id = 0;
const delta = (stepId: string, attempt: number, text: string, runId = "run-1"): ThreadEvent => ({
  id: ++id,
  event: "text.delta",
  data: { runId, stepId, attempt, delta: text },
});

describe("streamedTexts: what a reader shows of the deltas in the log", () => {
  it("concatenates one attempt's deltas in log order", () => {
    expect(streamedTexts([delta("assistant", 0, "Hel"), delta("assistant", 0, "lo")])).toEqual([
      { runId: "run-1", stepId: "assistant", attempt: 0, text: "Hello" },
    ]);
  });

  it("a retried attempt supersedes the failed attempt's partial text, and a late delta of the failed attempt is dropped", () => {
    const events = [
      delta("assistant", 0, "Half an ans"),
      delta("assistant", 1, "A whole "),
      delta("assistant", 0, "wer"),
      delta("assistant", 1, "answer"),
    ];
    expect(streamedTexts(events)).toEqual([
      { runId: "run-1", stepId: "assistant", attempt: 1, text: "A whole answer" },
    ]);
  });

  it("keeps each inference step (and run) apart, in the order they started, and reads one run when asked", () => {
    const events: ThreadEvent[] = [
      delta("assistant", 0, "first"),
      { id: ++id, event: "part.created", data: { partId: "p", runId: "run-1", messageId: "m", type: "text" } },
      delta("reviewer", 0, "second"),
      delta("assistant", 0, "other run", "run-2"),
    ];
    expect(streamedTexts(events).map((s) => s.text)).toEqual(["first", "second", "other run"]);
    expect(streamedTexts(events, "run-2").map((s) => s.text)).toEqual(["other run"]);
  });

  it("ignores AgentKit's own text.delta chunks (no run, step and attempt): they are not inference deltas", () => {
    expect(
      streamedTexts([{ id: ++id, event: "text.delta", data: { partId: "p", messageId: "m", delta: "whole answer" } }]),
    ).toEqual([]);
  });
});
