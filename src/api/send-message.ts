import { createHash } from "node:crypto";
import type { ChatMessageRegenerate, ChatMessageSent } from "../../inngest.config.js";
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
 * id holds). Another user's message id then never makes this user's message a silent no-op.
 */
export const chatMessageEventId = (userId: string, messageId: string) =>
  `chat-message-${createHash("sha256").update(userId).digest("base64url").slice(0, 22)}-${messageId}`;

/**
 * Sends a chat message for its user, as POST /api/chat and POST /api/ui/chat both do: refused first
 * (404 another user's thread, 409 a message id used for other words) rather than accepted and
 * refused inside the run, where the sender cannot see it. The event id is the message's (in the
 * user's scope), so a re-sent message starts no second run. The busy policy (the request's, else
 * BUSY_POLICY) travels in the event, so the turn applies the one the route did: reject is refused
 * here while the thread answers another message (409 naming that turn, nothing sent); the turn's
 * first statement refuses it again should a turn have started in between (src/history/busy.ts).
 */
export async function sendChatMessage(
  { db, sendEvent, busyPolicy, budgets }: Pick<ApiDeps, "db" | "sendEvent" | "busyPolicy" | "budgets">,
  message: ChatMessageSent,
): Promise<Sent> {
  await checkBudget(db, message.userId, budgets);
  const data = { ...message, busy: message.busy ?? busyPolicy ?? DEFAULT_BUSY_POLICY };
  await checkSendable(db, data);
  if (data.threadId) await checkNotBusy(db, { threadId: data.threadId, messageId: data.messageId, busy: data.busy });
  const { ids } = await sendEvent({
    id: chatMessageEventId(data.userId, data.messageId),
    name: "chat/message.sent",
    data,
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
 * A send over the user's usage budget is refused (429) before anything is sent; a turn already
 * running finishes, whatever it spends.
 */
async function checkBudget(db: ApiDeps["db"], userId: string, budgets: ApiDeps["budgets"]) {
  const refusal = await budgetRefusal(db, userId, budgets ?? {}, new Date());
  if (refusal) throw new BudgetExceeded(refusal);
}
