import { createTool } from "@inngest/agent-kit";
import { z } from "zod";

/**
 * Tells the model the current date and time. Reading the clock is a side effect: it runs in
 * step.run, so a replayed run sees the time the tool was first called, not a new one.
 */
export const currentTimeTool = createTool({
  name: "current_time",
  description:
    "Returns the current date and time (ISO 8601, UTC). Use it whenever the answer depends on today's date or the time.",
  parameters: z.object({}),
  handler: async (_input, { step }) => {
    const read = async () => ({ now: new Date().toISOString() });
    return step ? step.run("tool.current-time", read) : read();
  },
});

export const ROLL_DICE = "roll_dice";

/**
 * The demo of human approval (docs/approvals.md): harmless, yet declared as needing the user's
 * approval (src/agents/approvals.ts), so the playground shows the flow out of the box. The roll is
 * the side effect: it runs once, in its step, and only once approved.
 */
export const rollDiceTool = createTool({
  name: ROLL_DICE,
  description:
    "Rolls dice for the user (needs the user's approval first). Use it when the user asks you to roll dice or pick a random number.",
  parameters: z.object({
    count: z.number().int().min(1).max(10).describe("How many dice (1-10)."),
    sides: z.number().int().min(2).max(100).describe("Sides of each die (2-100)."),
  }),
  handler: async ({ count, sides }, { step }) => {
    const roll = async () => ({
      rolls: Array.from({ length: count }, () => 1 + Math.floor(Math.random() * sides)),
    });
    return step ? step.run("tool.roll-dice", roll) : roll();
  },
});
