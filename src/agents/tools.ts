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
