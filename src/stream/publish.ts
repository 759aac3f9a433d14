import type { AgentMessageChunk, State, StateData, StreamingEvent } from "@inngest/agent-kit";
import type pg from "pg";
import type { StepTools } from "../../inngest.config.js";
import { appendRunEvents, type NewEvent } from "../history/events.js";
import { loggedEvent } from "../history/thread-log.js";
import { turnSkippedAtStart, turnSkipReason } from "../agents/run-state.js";

/** The network's own endings: Threadline writes its ending where it records the turn instead. */
const NETWORK_ENDINGS = new Set<string>([
  "run.completed",
  "run.failed",
  "stream.ended",
] satisfies StreamingEvent["event"][]);

/**
 * AgentKit's `streaming.publish` for one turn: each chunk is appended to the thread's event log
 * in its own step, under AgentKit's chunk id (`publish-<sequence>:<event>`, the same on every
 * re-entry because the sequence restarts with the run), which is also the log's idempotency key:
 * a retried step or a re-entered function writes nothing twice.
 *
 * The network's run.completed / run.failed / stream.ended come after the answer is stored (or
 * while the run fails) and are not written: stream.ended is written by the statement that stores
 * the answer (threadline_store_answer) or records the failure or cancellation, so a client that
 * reads "ended" finds the turn recorded. A turn skipped while it waited (its message answered by
 * another run meanwhile) stores nothing: the wait's lookup that records the skip logs its ending
 * (turns-sql.ts selectEarlierUnfinishedTurn), so a run cancelled right after still ends it; it is
 * written here again under the same keys, which adds nothing unless that skip was recorded by a
 * lookup that did not log it (a run in flight over the deploy that made it log). A turn skipped
 * as it began logs nothing here (docs/engine.md, the re-run rule; a regenerate's first run whose
 * message left the path is ended by threadline_begin_turn).
 * The chunks AgentKit publishes are in the log's vocabulary (src/history/thread-log.ts).
 *
 * With `chunks` false (EVENT_LOG_CHUNKS unset) the turn passes AgentKit no publish at all, which
 * spares a step per answer part (AgentKit's `generate-text-part-id-…`, made only for a publish):
 * `afterRun` then writes that skipped ending, in its own step (`turn.log-skipped`).
 */
export function turnLog(input: {
  db: pg.Pool;
  step: StepTools;
  runId: string;
  state: State<StateData>;
  chunks: boolean;
}) {
  const { db, step, runId, state, chunks } = input;
  if (chunks) return { streaming: { streaming: { publish: turnPublisher(input) } }, afterRun: async () => {} };
  return {
    streaming: {},
    afterRun: async () => {
      const threadId = state.threadId;
      const skipReason = turnSkipReason(state);
      if (!threadId || !skipReason || turnSkippedAtStart(state)) return;
      await step.run("turn.log-skipped", () =>
        appendRunEvents(db, { threadId, runId, attempt: 0, events: skippedEnding(runId, skipReason) }),
      );
    },
  };
}

/** What a turn skipped while it waited logs: why, and the end of its stream. */
const skippedEnding = (runId: string, reason: string): NewEvent[] => [
  { key: "turn.skipped", event: "turn.skipped", data: { runId, reason } },
  { key: "stream.ended", event: "stream.ended", data: { scope: "network", status: "skipped", runId } },
];

function turnPublisher(input: { db: pg.Pool; step: StepTools; runId: string; state: State<StateData> }) {
  const { db, step, runId, state } = input;
  return async (chunk: AgentMessageChunk): Promise<void> => {
    const threadId = state.threadId;
    // A run that found its message answered as it began (a re-run) has no stream of its own.
    if (!threadId || turnSkippedAtStart(state)) return;
    const network = chunk.data.scope === "network" && NETWORK_ENDINGS.has(chunk.event);
    const skipReason = turnSkipReason(state);
    // A turn skipped while it waited logs its ending alone: the network's run.started comes after
    // the wait, which logged that ending already.
    if (skipReason ? !(network && chunk.event === "stream.ended") : network) return;
    const events: NewEvent[] = skipReason
      ? skippedEnding(runId, skipReason)
      : [{ key: chunk.id, ...loggedEvent(chunk) }];
    // Once the turn was stopped, cancelled or failed, its run's later chunks are not logged: that ending stays last.
    await step.run(chunk.id, () => appendRunEvents(db, { threadId, runId, attempt: 0, events }));
  };
}
