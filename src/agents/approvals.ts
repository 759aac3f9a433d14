import type { AgentResult, Tool } from "@inngest/agent-kit";
import { ROLL_DICE } from "./tools.js";

/**
 * Human approval of tool calls (docs/approvals.md). A tool, or a call of it by a predicate on its
 * arguments, is declared as needing approval; the agent's handler for such a call asks
 * `ToolApprovals.ask`, which the turn runner provides (it records the request and waits durably:
 * src/functions/tool-approvals.ts), so agents never touch storage. Approved, the real handler runs
 * (its side effect in its own step); denied or expired, the model gets a tool result saying the
 * tool did not run.
 */

/** Whether a call needs approval: always, never, or by its arguments. */
export type ApprovalRule = boolean | ((args: unknown) => boolean);

/**
 * How the human decided: approved, denied (by the owner, a stop of the turn, or the turn's end),
 * or nobody in time. (The decider's values: approvalDecidedBy in src/history/thread-log.ts.)
 */
export type ApprovalDecision = {
  status: "approved" | "denied" | "expired";
  decidedBy: "user" | "stop" | "expiry" | "turn-ended" | null;
  reason: string | null;
};

/**
 * One tool call the model made, as the approval names it. `inference`: how many results the run's
 * state held when it was made (deterministic on replay): providers that number their tool call ids
 * give two inferences of one turn the same ids.
 */
export type ToolCallRequest = { toolName: string; toolCallId: string; arguments: unknown; inference: number };

export type ToolApprovals = {
  /** The tools whose calls may need approval, by name. */
  rules: Readonly<Record<string, ApprovalRule>>;
  /** Whether the assistant has the demo tool (roll_dice, which needs approval). */
  demoTool: boolean;
  /** Records the request and waits durably for its decision. */
  ask: (call: ToolCallRequest) => Promise<ApprovalDecision>;
};

/**
 * The tool calls declared in code as needing approval, by tool name, beside the deployment's
 * (APPROVAL_TOOLS). A predicate sees the call's parsed arguments.
 */
const CODE_APPROVAL_RULES: Readonly<Record<string, ApprovalRule>> = { [ROLL_DICE]: true };

/** The rules in force: the code's, and every tool the deployment names (always). */
export const approvalRules = (deploymentTools: readonly string[]): Record<string, ApprovalRule> => ({
  ...CODE_APPROVAL_RULES,
  ...Object.fromEntries(deploymentTools.map((name) => [name, true])),
});

const needsApproval = (rule: ApprovalRule | undefined, args: unknown) =>
  typeof rule === "function" ? rule(args) : rule === true;

/** What the model is told instead of the tool's result: that it did not run, and why. */
function notRun(toolName: string, decision: ApprovalDecision) {
  const why =
    decision.status === "expired"
      ? "nobody approved it before the approval expired"
      : decision.decidedBy === "stop"
        ? "the user stopped the turn"
        : decision.decidedBy === "turn-ended"
          ? "the turn ended before anyone decided"
          : "the user denied it";
  return {
    ran: false,
    approval: decision.status,
    reason: decision.reason,
    message: `The ${toolName} call was not run: ${why}${decision.reason ? ` (${decision.reason})` : ""}. Do not claim it ran.`,
  };
}

type OnResponse = (args: { result: AgentResult }) => AgentResult;

/**
 * The agent's tools with approval in front of those that need it, and the agent's onResponse
 * hook that hands each call its id. AgentKit calls a handler with the call's input only; the
 * calls of an inference are read from its result (onResponse runs after the inference, before
 * the tools, which AgentKit invokes in the order the model listed them).
 */
export function gateTools(tools: Tool.Any[], approvals: ToolApprovals): { tools: Tool.Any[]; onResponse: OnResponse };
export function gateTools(
  tools: Tool.Any[],
  approvals: ToolApprovals | undefined,
): { tools: Tool.Any[]; onResponse?: OnResponse };
export function gateTools(tools: Tool.Any[], approvals: ToolApprovals | undefined) {
  // Nothing to gate: no hook, so the agent holds no state of a turn and may serve every turn.
  if (!approvals) return { tools };
  const queued = new Map<string, { id: string; input: unknown }[]>();
  const onResponse: OnResponse = ({ result }) => {
    queued.clear();
    for (const message of result.output) {
      if (message.type !== "tool_call") continue;
      for (const call of message.tools)
        queued.set(call.name, [...(queued.get(call.name) ?? []), { id: call.id, input: call.input }]);
    }
    return result;
  };
  const gated = tools.map((tool): Tool.Any => {
    const rule = approvals.rules[tool.name];
    if (rule === undefined || rule === false) return tool;
    return {
      ...tool,
      handler: async (input, options) => {
        const call = queued.get(tool.name)?.shift();
        if (!needsApproval(rule, input)) return tool.handler(input, options);
        if (!call) throw new Error(`AgentKit invoked ${tool.name} with no tool call of that name in the inference`);
        const decision = await approvals.ask({
          toolName: tool.name,
          toolCallId: call.id,
          arguments: input,
          inference: options.network?.state.results.length ?? 0,
        });
        return decision.status === "approved" ? tool.handler(input, options) : notRun(tool.name, decision);
      },
    };
  });
  return { tools: gated, onResponse };
}
