import type { Tool } from "@inngest/agent-kit";
import type pg from "pg";
import type { StepTools } from "../../inngest.config.js";
import { durably } from "../history/durable.js";
import type { MemoryComponent, MemoryContext, ThreadMessage } from "./component.js";

/** Memory components attached to each agent, by agent name. */
export type AgentComponents = Readonly<Record<string, readonly MemoryComponent[]>>;

/** What one agent gets from its components in a turn: their tools and their context before each model call. */
export type AgentMemory = {
  tools: Tool.Any[];
  /** `call` numbers the request within the turn (deterministic), so each request's step has its own id. */
  beforeModelCall: (request: { threadId: string; text: string; call: number }) => Promise<MemoryContext[]>;
};

/**
 * The memory components of one turn, their hooks run as steps with stable ids: a retried step
 * runs its hook again (hooks are idempotent), a memoized one is not run again. Thread-level hooks
 * run once per component, however many agents it is attached to.
 */
export function turnMemory({
  db,
  userId,
  step,
  components,
}: {
  db: pg.Pool;
  userId: string;
  step: StepTools;
  components: AgentComponents;
}) {
  const distinct = [
    ...new Map(
      Object.values(components)
        .flat()
        .map((component) => [component.name, component]),
    ).values(),
  ];

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
            const context = (await durably(step, `memory.${component.name}.context.${agentName}.${call}`, () =>
              hook({ db, userId, threadId, agentName }, { text }),
            )) as MemoryContext | null;
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

export type TurnMemory = ReturnType<typeof turnMemory>;
