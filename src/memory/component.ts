/*
 * src/memory: memory components, what an agent may remember about a user beyond one thread —
 * their contract (this file), the user-memory component (user-memory.ts) and which agents have
 * which (components.ts). A component reads and writes its storage through src/history and gives
 * tools to agents; it may import src/history and @inngest/agent-kit, never src/functions, src/api
 * or src/stream. Agents never import it: the turn runner (src/functions/turn-runner.ts) runs the
 * hooks as steps and hands each agent its tools and context.
 */
import type { Tool } from "@inngest/agent-kit";
import type pg from "pg";

/** What a component adds to one model request: text for the model, and what it costs in tokens. */
export type MemoryContext = { component: string; text: string; tokens: number };

/** The turn a component serves: the user, the thread and the agent it is attached to. */
type MemoryScope = { db: pg.Pool; userId: string; threadId: string; agentName: string };

/** A message of the thread as the components see it. */
export type ThreadMessage = { id: string; role: "user" | "assistant"; agentName: string; text: string };

/**
 * A memory component (Semantic Kernel's "agents with memory"): hooks into a thread's life and
 * gives an agent context and tools. Components are attached per agent (AgentsConfig.memory). The
 * turn runs every hook as a step of its own (src/functions/turn-runner.ts), so each hook must be
 * idempotent: a retried or re-run step calls it again with the same arguments.
 *
 * Thread deleted is not a hook in code: a component's rows reference threads ON DELETE CASCADE,
 * so every way a thread is deleted (the API, retention, erasing a user) removes them in the same
 * statement, and none can forget to call it.
 */
export type MemoryComponent = {
  name: string;
  /** Tools for the agent, bound to the turn's user; side effects in step.run. */
  tools?: (scope: Omit<MemoryScope, "threadId" | "agentName">) => Tool.Any[];
  /** A thread's first message was stored (a thread-level hook: no agent). */
  threadCreated?: (scope: Omit<MemoryScope, "agentName">) => Promise<void>;
  /** A message was stored: the user's, or an agent's answer. */
  newMessage?: (scope: MemoryScope, message: ThreadMessage) => Promise<void>;
  /** Before each model call of the agent: extra context for the request, or null for none. */
  beforeModelCall?: (scope: MemoryScope, request: { text: string }) => Promise<MemoryContext | null>;
  /** The user is being erased: delete what the component keeps about them (inside the erasing transaction). */
  userDeleted?: (db: pg.PoolClient, userId: string) => Promise<number>;
};
