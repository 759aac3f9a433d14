import type { AgentResult, State, StateData } from "@inngest/agent-kit";
import { textOf } from "../history/messages.js";
import { skippedAnswerId, turnSkipReason, turnStopped } from "../agents/run-state.js";

/**
 * What a turn function's run returns: shown in the dev server's run output. "skipped": the run
 * wrote nothing (a re-run of an answered message; `answerId` names the stored answer's first
 * result). "stopped": the user stopped the turn while the run went on; the answer it still reached
 * was not stored.
 */
export function turnOutcome(state: State<StateData>, messageId: string) {
  const skipped = turnSkipReason(state);
  if (skipped) {
    const answerId = skippedAnswerId(state);
    return {
      threadId: state.threadId,
      messageId,
      status: "skipped" as const,
      reason: skipped,
      ...(answerId !== undefined && { answerId }),
    };
  }
  return {
    threadId: state.threadId,
    messageId,
    status: turnStopped(state) ? ("stopped" as const) : ("completed" as const),
    answer: answerText(state.results.at(-1)),
  };
}

/** The text of an agent result's answer (a turn's final answer, a summary). */
export function answerText(result: AgentResult | undefined): string {
  return (result?.output ?? [])
    .filter((m) => m.type === "text" && m.role === "assistant")
    .map((m) => (m.type === "text" ? textOf(m.content) : ""))
    .join("\n");
}
