import { createAgent, type State } from "@inngest/agent-kit";
import { z } from "zod";
import type { ModelChoice } from "./model.js";
import { textStart } from "./text-cut.js";
import { type AgentMemory, threadView } from "./thread-view.js";

export const REVIEWER_NAME = "reviewer";

/** The state.data key the reviewer declares as its own: kept per thread between turns. */
export const REVIEWER_STATE_KEY = "reviewer";

const reviewerState = z.object({
  /** Answers the reviewer has checked in this thread. */
  reviews: z.number().int().nonnegative(),
  /** The reviewer's latest note, so it does not repeat itself next turn. */
  lastNote: z.string(),
});
export type ReviewerState = z.infer<typeof reviewerState>;

export const REVIEWER_SYSTEM_PROMPT =
  'You review the assistant\'s latest answer in this conversation. If it is correct and complete, reply exactly "OK". ' +
  "Otherwise reply with one or two sentences the user should know: what is wrong or missing. Never repeat the answer.";

/** Longest note kept in the reviewer's state. */
const MAX_NOTE = 500;

/** The reviewer's state in a run (loaded from the thread's agent state, or a fresh one). */
const readReviewerState = (state: State<Record<string, unknown>>): ReviewerState =>
  reviewerState.catch({ reviews: 0, lastNote: "" }).parse(state.data[REVIEWER_STATE_KEY]);

/**
 * The second agent of the "pair" network: checks the assistant's answer after it. It keeps its
 * own thread state (how many answers it reviewed, its last note), shown to it next turn.
 */
export function createReviewer(choice: ModelChoice, memory?: AgentMemory) {
  const view = threadView(REVIEWER_NAME, memory);
  return createAgent({
    name: REVIEWER_NAME,
    description: "Checks the assistant's answer and notes what is wrong or missing",
    system: ({ network }) => {
      const kept = network ? readReviewerState(network.state as State<Record<string, unknown>>) : undefined;
      return kept && kept.reviews > 0
        ? `${REVIEWER_SYSTEM_PROMPT}\nYou have reviewed ${kept.reviews} earlier answers in this thread; your latest note was: ${JSON.stringify(kept.lastNote)}`
        : REVIEWER_SYSTEM_PROMPT;
    },
    ...(choice.configured ? { model: choice.model } : {}),
    lifecycle: {
      onStart: view,
      // Deterministic from the memoized inference: the same state on every replay.
      onFinish: ({ result, network }) => {
        if (!network) return result;
        const state = network.state as State<Record<string, unknown>>;
        const note = result.output
          .flatMap((m) => (m.type === "text" && typeof m.content === "string" ? [m.content] : []))
          .join("\n");
        const kept = readReviewerState(state);
        state.data[REVIEWER_STATE_KEY] = {
          reviews: kept.reviews + 1,
          // Never half an emoji: PostgreSQL refuses the lone surrogate in jsonb, failing the turn.
          lastNote: textStart(note, MAX_NOTE),
        } satisfies ReviewerState;
        return result;
      },
    },
  });
}
