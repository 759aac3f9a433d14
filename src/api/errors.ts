import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { z } from "zod";
import { HistoryRefusal } from "../history/errors.js";

type Issue = { field: string; message: string };

const invalid = (c: Context, issues: Issue[]) =>
  c.json({ error: `Invalid request: ${issues.map((i) => `${i.field}: ${i.message}`).join("; ")}`, issues }, 400);

/** A refusal the client can act on: 400 naming each bad field. */
export const badRequest = (c: Context, error: Pick<z.ZodError, "issues">) =>
  invalid(c, error.issues.map((issue) => ({ field: issue.path.join(".") || "body", message: issue.message })));

/** The event could not reach Inngest: nothing was accepted, the client may send it again. */
export class EventNotSent extends Error {
  constructor(cause: unknown) {
    super(
      `The request was not accepted because its event could not be sent to Inngest (${cause instanceof Error ? cause.message : String(cause)}). ` +
        "Check that the Inngest dev server is running (npx inngest-cli@latest dev) or that INNGEST_EVENT_KEY is set, then send it again.",
      { cause },
    );
  }
}

const refusalStatus: Record<HistoryRefusal["code"], ContentfulStatusCode> = {
  thread_not_owned: 404,
  thread_not_found: 404,
  message_not_found: 404,
  message_conflict: 409,
  message_not_on_path: 409,
  not_a_user_message: 422,
};

/**
 * Another user's thread is answered exactly like one that does not exist (same status, same
 * body), so a caller cannot learn which thread ids exist.
 */
const threadNotFound = { error: "Thread not found: no thread with this id belongs to you.", code: "thread_not_found" } as const;
const hidesOwnership = (code: HistoryRefusal["code"]) => code === "thread_not_owned" || code === "thread_not_found";

/**
 * The app's error handler: storage refusals become their 4xx, a body that is not JSON a 400, an
 * unsent event a 503; anything else is a server fault (500) and is logged.
 */
export function answerError(error: Error, c: Context) {
  if (error instanceof HistoryRefusal && hidesOwnership(error.code)) return c.json(threadNotFound, 404);
  if (error instanceof HistoryRefusal) return c.json({ error: error.message, code: error.code }, refusalStatus[error.code]);
  if (error instanceof EventNotSent) return c.json({ error: error.message }, 503);
  if (error instanceof HTTPException && error.status === 400) return invalid(c, [{ field: "body", message: error.message }]);
  if (error instanceof HTTPException) return error.getResponse();
  console.error("[threadline] request failed", error);
  return c.json({ error: "Internal server error" }, 500);
}
