import type { HistoryConfig, Message, StateData } from "@inngest/agent-kit";
import type pg from "pg";
import {
  type ChatMessageRegenerate,
  type ChatMessageSent,
  memoryExtractRequested,
  type StepTools,
  threadSummarizeRequested,
  type ThreadSummarizeRequested,
} from "../../inngest.config.js";
import { ASSISTANT_NAME } from "../agents/assistant.js";
import { createChatNetwork, NETWORK_AGENTS } from "../agents/network.js";
import { summaryLag, turnSkipReason, userMessageText } from "../agents/run-state.js";
import { type AgentMemory, TurnState } from "../agents/thread-view.js";
import { createTurnHistory } from "../history/adapter.js";
import { agentThreadState } from "../history/agent-state.js";
import { DEFAULT_BUSY_POLICY } from "../history/busy-policy.js";
import { interruptEarlierTurns } from "../history/busy.js";
import { durably } from "../history/durable.js";
import { resolveHistoryPolicy } from "../history/policy.js";
import { loadUserMessage } from "../history/store.js";
import { SUMMARIZE_AFTER_MESSAGES } from "../history/summaries.js";
import type { MemoryComponent, MemoryContext, ThreadMessage } from "../memory/component.js";
import { type AgentComponents, type MemoryConfig, memoryComponents, NO_MEMORY } from "../memory/components.js";
import { turnLog } from "../stream/publish.js";
import type { AgentsConfig, FunctionDeps } from "./chat-turn.js";
import type { InferenceStream, InferenceUsage } from "./streaming-inference.js";
import { turnApprovals } from "./tool-approvals.js";
import { announceTurnFinished, turnOutcome } from "./turn-lifecycle.js";

/*
 * One turn, for both turn functions (chat-turn.ts, regenerate.ts): the user's message is stored,
 * the turn waits for the thread's earlier turns and reads its history, the agent network answers,
 * the answer is stored, and the turn announces that it finished when a later turn or a title
 * waits for that. Each storage call is its own step; this file creates the turn's steps, or the
 * hooks that do, in the order a run takes them.
 * How a turn ends otherwise (stop, deletion, failure, cancellation) is in turn-lifecycle.ts.
 */

const DEFAULT_AGENTS: AgentsConfig = { network: "assistant", memory: NO_MEMORY };

/** What started the turn: a chat message (chat-turn) or a regenerate request of a stored message. */
export type TurnRequest = { kind: "chat"; data: ChatMessageSent } | { kind: "regenerate"; data: ChatMessageRegenerate };

/** What a turn function's handler hands the runner from its context. */
type RunContext = {
  event: { id?: string; ts?: number };
  runId: string;
  step: StepTools;
  inferenceStream: InferenceStream;
  inferenceUsage: InferenceUsage;
};

export async function runTurn(
  deps: FunctionDeps,
  { event, runId, step, inferenceStream, inferenceUsage }: RunContext,
  request: TurnRequest,
) {
  const { db } = deps;
  const { kind, data } = request;
  const { userId, messageId } = data;
  const agents = deps.agents ?? DEFAULT_AGENTS;

  // history.load-message (regenerate): the event carries only ids, so the words the model answers are the stored ones.
  const content =
    request.kind === "regenerate"
      ? (await durably(step, "history.load-message", () => loadUserMessage(db, request.data))).text
      : request.data.content;

  // A regenerate carries no history settings: the operator's, else the agent's defaults.
  const policy = resolveHistoryPolicy({
    environment: deps.historyEnvironment,
    request: request.kind === "chat" ? request.data.history : undefined,
  });
  const conversation = request.kind === "chat" ? request.data.conversation : undefined;
  // A message sent while a turn of its thread runs (src/history/busy.ts): the event's policy, else BUSY_POLICY.
  const busy = request.kind === "chat" ? (request.data.busy ?? deps.busyPolicy ?? DEFAULT_BUSY_POLICY) : undefined;
  const history = createTurnHistory(db, {
    userId,
    messageId,
    runId,
    kind,
    eventId: event.id,
    // A message sent before its user's erasure is not stored (threadline_begin_turn).
    eventTime: event.ts,
    clientTimestamp: request.kind === "chat" ? request.data.clientTimestamp : undefined,
    policy,
    clientMessages: conversation?.length,
    edits: request.kind === "chat" ? request.data.edits : undefined,
    model: deps.model.configured ? { provider: deps.model.provider, name: deps.model.name } : undefined,
    busy,
    // history.append-results records the final answer's usage (no usage.<step id> step for it).
    usage: inferenceUsage,
  });
  const memory = turnMemory({ db, userId, step, ...configuredMemory(agents.memory) });
  const agentState = agentThreadState(db, { userId, declared: NETWORK_AGENTS[agents.network] });

  // AgentKit calls these in this order, around the agents' inferences.
  const hooks: HistoryConfig<StateData> = {
    // generate-network-id (AgentKit), then no step: a new thread takes its first message's id.
    createThread: history.createThread,
    appendUserMessage: async (args) => {
      // history.append-user-message: stores the message (and creates a new thread) or skips a re-run;
      // refuses it, storing nothing, when sent with busy reject while another turn runs.
      await history.appendUserMessage!(args);
      if (turnSkipReason(args.state)) return;
      const threadId = args.threadId!;
      // busy interrupt or rollback, when an unfinished turn was ahead as the message was stored:
      // history.find-turns-to-interrupt, then (when some run) history.interrupt-turns and
      // history.announce-interrupted, before the wait in history.get.
      if ((busy === "interrupt" || busy === "rollback") && history.turnAhead())
        await interruptEarlierTurns(step, db, {
          threadId,
          userId,
          runId,
          messageId,
          agentName: ASSISTANT_NAME,
          rollback: busy === "rollback",
        });
      // memory.<component>.thread-created: a new thread is named after its first message.
      if (kind === "chat" && threadId === args.userMessage.id) await memory.threadCreated(threadId);
      const text = userMessageText(args.state) ?? args.userMessage.content;
      // memory.<component>.new-message.<messageId>
      await memory.newMessage(threadId, { id: args.userMessage.id, role: "user", agentName: "user", text });
    },
    // history.find-earlier-turn, history.wait-for-turn (rounds .2, .3, …) and history.get when an
    // unfinished turn was ahead as the message was stored; otherwise no step (the message's step read
    // the window). AgentKit calls no get for a new thread or a conversation the client sent.
    get: history.get,
    // agent-state.load: before the first agent (beforeFirstAgent, below).
    // Then, for each inference: generate-agent-ids-<k> (AgentKit), memory.<component>.context.<agent>.<k>,
    // the agent's inference (its name; `<name>:<k>` when repeated), its tools' steps, and, when
    // chunks are logged, publish-<n>:<event> (src/stream/publish.ts).
    appendResults: async (args) => {
      if (turnSkipReason(args.state)) return history.appendResults!(args);
      // agent-state.save: before the answer, whose store releases the next turn, which loads it.
      await agentState.save(step, args.state);
      // history.append-results: stores the answer and completes the turn.
      await history.appendResults!(args);
      // memory.<component>.new-message.<resultId>
      for (const [position, result] of args.newResults.entries()) {
        const text = result.output
          .flatMap((m) => (m.type === "text" && typeof m.content === "string" ? [m.content] : []))
          .join("\n");
        if (text)
          await memory.newMessage(args.threadId!, {
            id: result.id ?? `${position}`,
            role: "assistant",
            agentName: result.agentName,
            text,
          });
      }
    },
  };
  // Client-sent messages make AgentKit skip history.get; they are the turn's earlier history.
  const state = new TurnState({
    data: {},
    ...(data.threadId ? { threadId: data.threadId } : {}),
    ...(conversation ? { messages: conversation as Message[] } : {}),
  });
  const network = createChatNetwork({
    model: deps.model,
    state,
    history: hooks,
    network: agents.network,
    memory: memory.forAgent,
    // tool.approval.<call>.request, .wait, .check: in a tool's handler, for a call that needs approval.
    ...(agents.approvals
      ? { approvals: turnApprovals(agents.approvals, { db, step, runId, eventId: event.id, messageId }) }
      : {}),
    // agent-state.load: once, before the first agent (after get: earlier turns have saved theirs).
    beforeFirstAgent: (state) => agentState.load(step, state),
  });

  inferenceStream.writeTo(state);
  const log = turnLog({ db, step, runId, state, chunks: deps.eventLog === true });
  // usage.<step id>: a final answer's usage that no answer store recorded (AgentKit rejected the
  // answer, a later step failed, the turn stored nothing), recorded before the run goes on or fails.
  // A run that failed fails with its own error: a usage step failing too must not replace it.
  const run = await network.run({ id: messageId, content, role: "user" }, { state, ...log.streaming }).then(
    async (done) => {
      await inferenceUsage.flush();
      return done;
    },
    async (error: unknown) => {
      await inferenceUsage.flush().catch(() => undefined);
      throw error;
    },
  );
  // turn.log-skipped: a turn skipped while it waited, without chunk logging (with it, publish-<n>:stream.ended).
  await log.afterRun();
  const threadId = run.state.threadId!;
  const outcome = turnOutcome(run.state, messageId);

  // turn.finished: releases the thread's next turn, and asks for a title; not sent when the
  // answer's store found neither a later turn unfinished nor the thread untitled.
  if (history.finishAwaited()) await announceTurnFinished(step, { threadId, runId, messageId, status: outcome.status });

  // A chat turn's requests to other functions (a regenerate sends none), so their failures never reach it.
  // history.request-summary: the summary is built by summarize-thread.
  const lag = kind === "chat" && !turnSkipReason(run.state) ? summaryLag(run.state) : undefined;
  const summaryRequested = lag !== undefined && lag.unsummarized > SUMMARIZE_AFTER_MESSAGES;
  if (summaryRequested) {
    // A plain event, not threadSummarizeRequested.create(): the SDK validates a created event on
    // send (~20 µs a turn), and this one holds the run's own checked ids and a stored sequence
    // number. summarize-thread validates it on receipt, as every function does its trigger's.
    const data: ThreadSummarizeRequested = { threadId, userId, beforeSeq: lag.windowStart };
    await step.sendEvent("history.request-summary", { name: threadSummarizeRequested.name, data });
  }
  // memory.request-extraction: memories are proposed by extract-memories.
  if (kind === "chat" && agents.memory.extract && outcome.status === "completed") {
    await step.sendEvent("memory.request-extraction", memoryExtractRequested.create({ threadId, userId, messageId }));
  }
  return { outcome, history: { ...policy, ...history.load() }, summaryRequested };
}

/**
 * The memory components a deployment configured, each agent's and the distinct ones: the same for
 * every turn of a configuration (components are stateless), so built once per configuration
 * rather than on each of a run's requests.
 */
const builtMemory = new WeakMap<MemoryConfig, { components: AgentComponents; distinct: MemoryComponent[] }>();

function configuredMemory(config: MemoryConfig) {
  const built = builtMemory.get(config);
  if (built) return built;
  const components = memoryComponents(config);
  const distinct = [
    ...new Map(
      Object.values(components)
        .flat()
        .map((component) => [component.name, component]),
    ).values(),
  ];
  builtMemory.set(config, { components, distinct });
  return { components, distinct };
}

/**
 * The memory components of one turn, their hooks run as steps with stable ids: a retried step
 * runs its hook again (hooks are idempotent), a memoized one is not run again. Thread-level hooks
 * run once per component, however many agents it is attached to.
 */
function turnMemory({
  db,
  userId,
  step,
  components,
  distinct,
}: {
  db: pg.Pool;
  userId: string;
  step: StepTools;
  components: AgentComponents;
  distinct: MemoryComponent[];
}) {
  return {
    forAgent: (agentName: string): AgentMemory | undefined => {
      const attached = components[agentName] ?? [];
      if (attached.length === 0) return undefined;
      return {
        tools: attached.flatMap((component) => component.tools?.({ db, userId }) ?? []),
        beforeModelCall: async ({ threadId, text, call }) => {
          const contexts: MemoryContext[] = [];
          for (const component of attached) {
            if (!component.beforeModelCall) continue;
            const hook = component.beforeModelCall;
            const context = await durably(step, `memory.${component.name}.context.${agentName}.${call}`, () =>
              hook({ db, userId, threadId, agentName }, { text }),
            );
            if (context) contexts.push(context);
          }
          return contexts;
        },
      };
    },

    threadCreated: async (threadId: string) => {
      for (const component of distinct) {
        const hook = component.threadCreated;
        if (hook) await durably(step, `memory.${component.name}.thread-created`, () => hook({ db, userId, threadId }));
      }
    },

    newMessage: async (threadId: string, message: ThreadMessage) => {
      for (const component of distinct) {
        const hook = component.newMessage;
        if (hook)
          await durably(step, `memory.${component.name}.new-message.${message.id}`, () =>
            hook({ db, userId, threadId, agentName: message.agentName }, message),
          );
      }
    },
  };
}
