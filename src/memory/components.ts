import type { MemoryComponent } from "./component.js";
import { DEFAULT_MEMORY_CONTEXT_TOKENS, USER_MEMORY, userMemory } from "./user-memory.js";

/**
 * Which memory components each agent has (by agent name), and their settings: configuration,
 * read from the environment (MEMORY_AGENTS, MEMORY_CONTEXT_TOKENS), or given in code, where a
 * deployment may also attach components of its own. No agent has any by default: nothing is
 * remembered unless the operator turns it on.
 */
export type MemoryConfig = {
  agents: Readonly<Record<string, readonly (typeof USER_MEMORY | MemoryComponent)[]>>;
  contextTokens: number;
  /** Propose memories from each completed chat turn (the extract-memories function). */
  extract?: boolean;
};

export const NO_MEMORY: MemoryConfig = { agents: {}, contextTokens: DEFAULT_MEMORY_CONTEXT_TOKENS };

/** Memory components attached to each agent, by agent name. */
export type AgentComponents = Readonly<Record<string, readonly MemoryComponent[]>>;

/** The configured components, built once per turn and shared by the agents that name them. */
export function memoryComponents(config: MemoryConfig): AgentComponents {
  const built: Record<string, MemoryComponent> = { [USER_MEMORY]: userMemory({ maxTokens: config.contextTokens }) };
  return Object.fromEntries(
    Object.entries(config.agents).map(([agent, names]) => [
      agent,
      names.map((name) => (typeof name === "string" ? built[name]! : name)),
    ]),
  );
}

/** Every component a deployment may configure, for erasing a user (each erases what it keeps). */
export const allMemoryComponents = (): MemoryComponent[] => [userMemory()];
