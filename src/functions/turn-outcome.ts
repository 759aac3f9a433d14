import type { AgentResult, State, StateData } from "@inngest/agent-kit";
import { textOf } from "../history/messages.js";
import { turnSkipReason } from "../run-state.js";

/** What a turn function's run returns: shown in the dev server's run output. */
export function turnOutcome(state: State<StateData>, messageId: string) {
  const skipped = turnSkipReason(state);
  return {
    threadId: state.threadId,
    messageId,
    status: skipped ? ("skipped" as const) : ("completed" as const),
    ...(skipped ? { reason: skipped } : { answer: answerText(state.results.at(-1)) }),
  };
}

/** The text of an agent result's answer (a turn's final answer, a summary). */
export function answerText(result: AgentResult | undefined): string {
  return (result?.output ?? [])
    .filter((m) => m.type === "text" && m.role === "assistant")
    .map((m) => (m.type === "text" ? textOf(m.content) : ""))
    .join("\n");
}
