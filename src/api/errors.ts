import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { z } from "zod";
import { HistoryRefusal } from "../history/errors.js";

/** A refusal the client can act on: a 4xx with a message and, for bad input, each bad field. */
export function badRequest(c: Context, error: z.ZodError) {
  const issues = error.issues.map((issue) => ({ field: issue.path.join(".") || "body", message: issue.message }));
  return c.json({ error: `Invalid request: ${issues.map((i) => `${i.field}: ${i.message}`).join("; ")}`, issues }, 400);
}

const refusalStatus: Record<HistoryRefusal["code"], ContentfulStatusCode> = {
  thread_not_owned: 403,
  thread_not_found: 404,
  message_not_found: 404,
  message_conflict: 409,
  not_a_user_message: 422,
  message_not_on_path: 409,
};

/** Maps storage refusals to their HTTP status; anything else is a server fault (500). */
export function refusal(c: Context, error: unknown) {
  if (error instanceof HistoryRefusal) return c.json({ error: error.message, code: error.code }, refusalStatus[error.code]);
  throw error;
}

/** The event could not reach Inngest: nothing was accepted, the client may send it again. */
export function eventNotSent(c: Context, error: Error) {
  return c.json(
    {
      error: `The message was not accepted because the event could not be sent to Inngest (${error.message}). Check that the Inngest dev server is running (npx inngest-cli@latest dev) or that INNGEST_EVENT_KEY is set, then send it again.`,
    },
    503,
  );
}
