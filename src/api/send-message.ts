import { createHash } from "node:crypto";
import type { ChatMessageRegenerate, ChatMessageSent } from "../../inngest.config.js";
import { checkEditable } from "../history/branches.js";
import { DEFAULT_BUSY_POLICY } from "../history/busy-policy.js";
import { checkNotBusy } from "../history/busy.js";
import { checkSendable, loadUserMessage } from "../history/store.js";
import { budgetRefusal } from "../history/usage.js";
import type { ApiDeps } from "./deps.js";
import { BudgetExceeded } from "./errors.js";

/** What a sending route answers: the ids the client follows the turn with. */
export type Sent = { threadId: string; messageId: string; eventId: string };

/**
 * The chat/message.sent event's id: Inngest drops an event whose id it has seen (for 24 hours), so
 * the id is the message's within its user's scope (a digest of the user id: bounded, whatever the
 * id holds). Another user's message id then never makes this user's message a silent no-op. A
 * message a run refused (busy reject, a turn having begun after the route's check: nothing stored)
 * is sent again under an id that also names that run, which Inngest has not seen: the refusal
 * says to send it again, and the same id would be dropped. Sent again once more, it is the same
 * event again (a run answering it already started), unless another run refused it meanwhile.
 */
export const chatMessageEventId = (userId: string, messageId: string, refusedRunId?: string | null) =>
  `chat-message-${digest(userId)}-${messageId}${refusedRunId ? `-after-${digest(refusedRunId)}` : ""}`;

const digest = (text: string) => createHash("sha256").update(text).digest("base64url").slice(0, 22);

/**
 * A message sent again after run `refusedRunId` began no turn for it names that run: chat-turn's
 * idempotency key then differs from that run's, which Inngest keeps for 24 hours whatever the run
 * did (the event id alone would not start a run). A client's own resentAfter is never taken.
 */
const resentAfter = <T extends ChatMessageSent>(data: T, refusedRunId: string | null): T => {
  const { resentAfter: _ignored, ...rest } = data;
  return (refusedRunId ? { ...rest, resentAfter: refusedRunId } : rest) as T;
};

/**
 * Sends a chat message for its user, as POST /api/chat and POST /api/ui/chat both do: refused first
 * (404 another user's thread, 409 a message id used for other words) rather than accepted and
 * refused inside the run, where the sender cannot see it. The event id is the message's (in the
 * user's scope), so a re-sent message starts no second run. The busy policy (the request's, else
 * BUSY_POLICY) travels in the event, so the turn applies the one the route did: reject is refused
 * here while the thread answers another message (409 naming that turn, nothing sent); the turn's
 * first statement refuses it again should a turn have started in between, and logs the refusal
 * (message.refused: src/history/busy.ts).
 */
export async function sendChatMessage(
  { db, sendEvent, busyPolicy, budgets }: Pick<ApiDeps, "db" | "sendEvent" | "busyPolicy" | "budgets">,
  message: ChatMessageSent,
): Promise<Sent> {
  await checkBudget(db, message.userId, budgets);
  const data = { ...message, busy: message.busy ?? busyPolicy ?? DEFAULT_BUSY_POLICY };
  const { refusedRunId } = await checkSendable(db, data);
  if (data.threadId) await checkNotBusy(db, { threadId: data.threadId, messageId: data.messageId, busy: data.busy });
  const { ids } = await sendEvent({
    id: chatMessageEventId(data.userId, data.messageId, refusedRunId),
    name: "chat/message.sent",
    data: resentAfter(data, refusedRunId),
  });
  return { threadId: data.threadId ?? data.messageId, messageId: data.messageId, eventId: ids[0]! };
}

/**
 * Asks for a new answer to a user message, as the regenerate route and POST /api/ui/chat both do:
 * the message must be a user message of the caller's thread on its current path (a 4xx and nothing
 * sent otherwise).
 */
export async function sendRegenerate(
  { db, sendEvent, budgets }: Pick<ApiDeps, "db" | "sendEvent" | "budgets">,
  data: ChatMessageRegenerate,
): Promise<Sent> {
  await checkBudget(db, data.userId, budgets);
  await loadUserMessage(db, data);
  const { ids } = await sendEvent({ name: "chat/message.regenerate", data });
  return { threadId: data.threadId, messageId: data.messageId, eventId: ids[0]! };
}

/**
 * Sends an edit of a user message for its user (the edit route, POST /api/ui/chat with useChat's
 * edit): refused first (429 over budget, 404, 409 a turn running or the id used for other words,
 * 422) rather than inside the run. The event is a chat message that names the message it edits, under the new
 * message's event id: a retried edit starts no second run.
 */
export async function sendEdit(
  { db, sendEvent, budgets }: Pick<ApiDeps, "db" | "sendEvent" | "budgets">,
  edit: ChatMessageSent & { threadId: string; edits: string },
): Promise<Sent> {
  await checkBudget(db, edit.userId, budgets);
  // Refused while the thread answers (409 naming the turn); should a turn begin after this check,
  // policy reject refuses the edit's run before it stores anything (threadline_begin_turn).
  const data = { ...edit, busy: "reject" as const };
  const { refusedRunId } = await checkEditable(db, {
    threadId: data.threadId,
    userId: data.userId,
    editedId: data.edits,
    messageId: data.messageId,
    content: data.content,
  });
  const { ids } = await sendEvent({
    id: chatMessageEventId(data.userId, data.messageId, refusedRunId),
    name: "chat/message.sent",
    data: resentAfter(data, refusedRunId),
  });
  return { threadId: data.threadId, messageId: data.messageId, eventId: ids[0]! };
}

/**
 * A send over the user's usage budget is refused (429) before anything is sent; a turn already
 * running finishes, whatever it spends.
 */
async function checkBudget(db: ApiDeps["db"], userId: string, budgets: ApiDeps["budgets"]) {
  const refusal = await budgetRefusal(db, userId, budgets ?? {}, new Date());
  if (refusal) throw new BudgetExceeded(refusal);
}
