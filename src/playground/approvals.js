import { h } from "./render.js";

/**
 * Tool calls awaiting the user's approval (docs/approvals.md): a card per call under its user
 * message, with the tool, its arguments and Approve / Deny. What the cards show comes from the
 * messages API (`turn.approvals` of a turn `awaiting_approval`), so a reload rebuilds them; the
 * log's tool.approval.* events tell the page to read the thread again.
 */

/** Whether a log row changes what the approval cards show. */
export const isApprovalEvent = (row) =>
  row.event === "tool.approval.requested" ||
  row.event === "tool.approval.decided" ||
  row.event === "tool.approval.expired";

/** Whether a turn status is one of a turn not ended that waits for the user. */
export const isAwaitingApproval = (status) => status === "awaiting_approval";

/** The cards of a turn's pending tool calls (none: null); `decide(approvalId, decision)` records the click. */
export function approvalCards(turn, decide) {
  const pending = turn?.status === "awaiting_approval" ? (turn.approvals ?? []) : [];
  if (pending.length === 0) return null;
  return pending.map((approval) => {
    const buttons = [
      approvalButton("Approve", () => decide(approval.approvalId, "approve")),
      approvalButton("Deny", () => decide(approval.approvalId, "deny")),
    ];
    const card = h(
      "div",
      { class: "approval", role: "group", "aria-label": `Approval of ${approval.toolName}` },
      h("p", {}, "The assistant wants to use ", h("strong", {}, approval.toolName), ":"),
      h("pre", { class: "approval-arguments" }, JSON.stringify(approval.arguments, null, 2)),
      h("p", { class: "tools" }, ...buttons),
      h("p", { class: "meta" }, `Expires ${new Date(approval.expiresAt).toLocaleString()}`),
    );
    // One decision per card: both buttons wait while it is being recorded.
    for (const button of buttons)
      button.addEventListener("click", () => {
        for (const other of buttons) other.disabled = true;
      });
    return card;
  });
}

function approvalButton(label, onClick) {
  const button = h("button", { type: "button" }, label);
  button.addEventListener("click", onClick);
  return button;
}
