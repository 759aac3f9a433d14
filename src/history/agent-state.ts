/**
 * Per-agent thread state (agent_thread_state): what each agent keeps between turns of a thread,
 * loaded and saved as durable steps. Imports: pg, memories-sql.ts, durable.ts, jsonBytes.
 */
import type { State } from "@inngest/agent-kit";
import { NonRetriableError } from "inngest";
import type pg from "pg";
import { jsonBytes, type StepTools } from "../../inngest.config.js";
import { durably } from "./durable.js";
import * as sql from "./memories-sql.js";

/** Largest state one agent keeps in one thread, as JSON: it travels through a step's output each turn. */
const MAX_AGENT_STATE_BYTES = 32_000;

/** The state.data keys each agent declares as its own: only those are stored, and only for those agents. */
export type DeclaredState = Readonly<Record<string, readonly string[]>>;

type AnyState = State<Record<string, unknown>>;

/**
 * Per-agent thread state (the Agent Framework's thread store): each agent that declares state.data
 * keys gets them back on the next turn of the same thread. Loaded once at the start of the turn
 * (after the earlier turns of the thread finished) and saved once at its end (before the answer
 * completes the turn, so the next turn reads it), each as one step. Agents that declare nothing
 * cost no step and store nothing.
 */
export function agentThreadState(db: pg.Pool, { userId, declared }: { userId: string; declared: DeclaredState }) {
  const agents = Object.keys(declared).filter((agent) => declared[agent]!.length > 0);

  return {
    load: async (step: StepTools, state: AnyState) => {
      if (agents.length === 0 || !state.threadId) return;
      const threadId = state.threadId;
      const rows = await durably(step, "agent-state.load", async () => {
        const { rows } = await db.query<sql.SelectAgentStateRow>(sql.selectAgentState, [threadId, userId, agents]);
        return rows;
      });
      for (const row of rows) {
        for (const key of declared[row.agent_name] ?? []) {
          if (key in row.data) (state.data as Record<string, unknown>)[key] = row.data[key];
        }
      }
    },

    save: async (step: StepTools, state: AnyState) => {
      if (agents.length === 0 || !state.threadId) return;
      const threadId = state.threadId;
      const data = state.data as Record<string, unknown>;
      const slices = agents.map((agent) => ({
        agent,
        data: Object.fromEntries(
          declared[agent]!.filter((key) => data[key] !== undefined).map((key) => [key, data[key]]),
        ),
      }));
      for (const slice of slices) {
        const bytes = jsonBytes(slice.data);
        if (bytes > MAX_AGENT_STATE_BYTES) {
          throw new NonRetriableError(
            `Agent ${slice.agent} keeps ${bytes} bytes of thread state, over the ${MAX_AGENT_STATE_BYTES}-byte limit: keep less in its state.data keys.`,
          );
        }
      }
      await durably(step, "agent-state.save", async () => {
        await db.query(sql.upsertAgentState, [threadId, userId, JSON.stringify(slices)]);
      });
    },
  };
}
