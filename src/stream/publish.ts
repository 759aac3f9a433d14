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
 * another run meanwhile) stores nothing: its ending is written here. A turn skipped as it began
 * logs nothing at all (docs/engine.md, the re-run rule).
 * `chunks` false (EVENT_LOG_CHUNKS unset): only that skipped ending is written, no chunk.
 * The chunks AgentKit publishes are in the log's vocabulary (src/history/thread-log.ts).
 */
export function turnPublisher(input: {
  db: pg.Pool;
  step: StepTools | undefined;
  runId: string;
  state: State<StateData>;
  chunks: boolean;
}) {
  const { db, step, runId, state, chunks } = input;
  return async (chunk: AgentMessageChunk): Promise<void> => {
    const threadId = state.threadId;
    // A run that found its message answered as it began (a re-run) has no stream of its own.
    if (!threadId || turnSkippedAtStart(state)) return;
    const network = chunk.data.scope === "network" && NETWORK_ENDINGS.has(chunk.event);
    const skipReason = turnSkipReason(state);
    if (network && !(skipReason && chunk.event === "stream.ended")) return;
    if (!network && !chunks) return;
    const events: NewEvent[] = network
      ? [
          { key: "turn.skipped", event: "turn.skipped", data: { runId, reason: skipReason! } },
          { key: "stream.ended", event: "stream.ended", data: { scope: "network", status: "skipped", runId } },
        ]
      : [{ key: chunk.id, ...loggedEvent(chunk) }];
    // Once the turn was stopped, cancelled or failed, its run's later chunks are not logged: that ending stays last.
    const write = () => appendRunEvents(db, { threadId, runId, attempt: 0, events });
    if (step) await step.run(chunk.id, write);
    else await write();
  };
}
