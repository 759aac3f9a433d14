import { randomUUID } from "node:crypto";
import type { InngestFunction } from "inngest";
import type pg from "pg";
import { chatMessageRegenerate, chatMessageSent, inngest, toolApprovalDecided } from "../../inngest.config.js";
import type { ModelChoice } from "../../src/agents/model.js";
import type { BusyPolicy } from "../../src/history/busy-policy.js";
import { createChatTurn } from "../../src/functions/chat-turn.js";
import { createRegenerate } from "../../src/functions/regenerate.js";
import type { ApprovalSettings } from "../../src/functions/tool-approvals.js";
import { CHAT_TURN_ID, createTurnCancellation, REGENERATE_ID } from "../../src/functions/turn-lifecycle.js";
import { NO_MEMORY } from "../../src/memory/components.js";
import { createEventNotifier } from "../../src/stream/notifier.js";
import { cancels } from "./cancel-on.js";
import {
  deliverToWaits,
  execute,
  executeFailureHandler,
  onSentEvents,
  type Execution,
  type SentEvent,
  StepFault,
} from "./engine.js";
import { scriptedModel } from "./fixtures.js";
import { createApp } from "../../src/server.js";
import type { ModelServer } from "./model-server.js";
import { listen } from "./http.js";

/**
 * A turn the app started: its run id, its event and its execution (settled when the run ends);
 * `cancelled` once a stop of its user message cancelled it.
 */
type LiveRun = { runId: string; event: SentEvent; execution: Promise<Execution>; cancelled: boolean };

const CANCELLED = "the run was cancelled (cancelOn): Inngest starts none of its steps";

export type LiveApp = {
  url: string;
  runs: LiveRun[];
  /** Cuts every open connection (a dropped network, a proxy's timeout): clients must reconnect. */
  dropConnections: () => void;
  close: () => Promise<void>;
};

/**
 * The app as `npm run dev` serves it, over real HTTP on a free port of 127.0.0.1, with AUTH=dev
 * (the X-Threadline-User header names the user) and INFERENCE=stream; its model is the scripted
 * one unless `options.model` says otherwise (an unconfigured one, say); `options.busyPolicy` is its BUSY_POLICY. A chat message or
 * regenerate it accepts runs at once, in the background, in this process: the real turn function
 * under the test engine, streaming the scripted model's answer into the event log. Each run gets
 * one attempt: one that fails has failed for good, and its onFailure handler runs as Inngest
 * would run it then. An event the app or a run sends (a stop, a thread's deletion) cancels the unfinished runs
 * that the functions' own cancelOn matches (cancel-on.ts), as Inngest does: a step executing goes on to its end (a
 * streaming inference ends at its next batch of text), no later step starts, no onFailure runs,
 * and inngest/function.cancelled reaches the turn-cancelled function.
 */
export async function startLiveApp(
  db: pg.Pool,
  model: ModelServer,
  options: { model?: ModelChoice; busyPolicy?: BusyPolicy; approvals?: ApprovalSettings } = {},
): Promise<LiveApp> {
  const deps = {
    db,
    model: options.model ?? scriptedModel(model),
    inference: "stream" as const,
    ...(options.busyPolicy ? { busyPolicy: options.busyPolicy } : {}),
    ...(options.approvals
      ? { agents: { network: "assistant" as const, memory: NO_MEMORY, approvals: options.approvals } }
      : {}),
  };
  const functions: Record<string, { fn: InngestFunction.Like; id: string }> = {
    [chatMessageSent.name]: { fn: createChatTurn(deps), id: CHAT_TURN_ID },
    [chatMessageRegenerate.name]: { fn: createRegenerate(deps), id: REGENERATE_ID },
  };
  const turnCancellation = createTurnCancellation({ db });
  const runs: LiveRun[] = [];
  const ended = new Set<LiveRun>();
  const events = createEventNotifier(db);
  // Each unfinished run whose function's cancelOn matches the event is cancelled.
  const cancelMatching = (event: SentEvent) => {
    for (const run of runs)
      if (!ended.has(run) && cancels(functions[run.event.name]!.fn, run.event, event)) run.cancelled = true;
  };
  // Events a run sends cancel too (a turn interrupting another sends its stop).
  const unsubscribe = onSentEvents((sent) => sent.forEach(cancelMatching));
  const app = createApp({
    db,
    functions: [],
    serving: { mode: "dev" },
    auth: { dev: true },
    events,
    service: { model: deps.model, inference: deps.inference },
    busyPolicy: options.busyPolicy,
    sendEvent: async (event) => {
      // An approval's decision wakes the run waiting for it, as Inngest delivers it.
      if (event.name === toolApprovalDecided.name) deliverToWaits(event);
      cancelMatching(event);
      const started = functions[event.name];
      if (started) {
        const { fn, id } = started;
        const run = { runId: `run-${randomUUID()}`, event, cancelled: false } as LiveRun;
        const beforeStep = async () => {
          if (run.cancelled) throw new StepFault(CANCELLED);
        };
        run.execution = execute(fn, event, { runId: run.runId, beforeStep }).then(async (execution) => {
          ended.add(run);
          if (run.cancelled) {
            await execute(turnCancellation, {
              name: "inngest/function.cancelled",
              data: { function_id: `${inngest.id}-${id}`, run_id: run.runId },
            });
          } else if (execution.error !== undefined) {
            const { name, message } = execution.error as Error;
            await executeFailureHandler(fn, { runId: run.runId, event, error: { name, message } });
          }
          return execution;
        });
        runs.push(run);
      }
      return { ids: [`evt-${randomUUID()}`] };
    },
  });
  const listening = await listen(app.fetch);

  return {
    url: listening.url,
    runs,
    dropConnections: () => listening.server.closeAllConnections(),
    close: async () => {
      unsubscribe();
      // Closing the notifier ends the open event streams, so the server can close.
      await events.close();
      await listening.close();
      // A run nobody awaited whose callback failed (execute rejects then) fails the closing hook, not passes unseen.
      const rejected = (await Promise.allSettled(runs.map((run) => run.execution))).find(
        (r) => r.status === "rejected",
      );
      if (rejected) throw rejected.reason;
    },
  };
}
