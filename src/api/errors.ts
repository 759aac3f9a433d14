import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { RequestIdVariables } from "hono/request-id";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { z } from "zod";
import { ThreadBusy } from "../history/busy.js";
import { HistoryRefusal } from "../history/errors.js";
import type { BudgetRefusal } from "../history/usage.js";
import { logger } from "../platform/logger.js";

/** The app's context: every request carries an id (hono/request-id), logged with any fault. */
export type AppEnv = { Variables: RequestIdVariables };

type Issue = { field: string; message: string };

const invalid = (c: Context, issues: Issue[], status: 400 | 413 = 400) =>
  c.json({ error: `Invalid request: ${issues.map((i) => `${i.field}: ${i.message}`).join("; ")}`, issues }, status);

/** A schema's issue as validation reports it (zod's issues, through the standard schema interface). */
type SchemaIssue = {
  readonly message: string;
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
};

const fieldOf = (issue: SchemaIssue) =>
  (issue.path ?? []).map((segment) => String(typeof segment === "object" ? segment.key : segment)).join(".");

/** A refusal the client can act on: 400 naming each bad field (413 when a field is over a size limit). */
export const badRequest = (c: Context, error: { issues: readonly SchemaIssue[] }) =>
  invalid(
    c,
    error.issues.map((issue) => ({ field: fieldOf(issue) || "body", message: issue.message })),
    // The schemas mark what is over a size limit (TOO_LARGE): the request is too large, not malformed.
    error.issues.some((issue) => "params" in issue && (issue.params as { tooLarge?: boolean } | undefined)?.tooLarge)
      ? 413
      : 400,
  );

/** The event could not reach Inngest: nothing was accepted, the client may send it again. */
export class EventNotSent extends Error {
  constructor(
    cause: unknown,
    /** What the operator should check, naming the configured engine (inngest-engine.ts engineAdvice). */
    readonly advice: string,
  ) {
    super("The event could not be sent to Inngest", { cause });
    this.name = "EventNotSent";
  }
}

/** Inngest realtime could not be reached (a subscription token could not be had): the client may ask again. */
export class RealtimeUnavailable extends Error {
  constructor(cause: unknown) {
    super("Inngest realtime could not be reached", { cause });
    this.name = "RealtimeUnavailable";
  }
}

/** The event would exceed Inngest's event size limit: sending it again can never succeed. */
export class EventTooLarge extends Error {
  constructor(
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(
      `Request too large: it makes an event of ${bytes} bytes, over the ${limit} bytes Inngest accepts. ` +
        "Send a shorter message or fewer conversation messages.",
    );
    this.name = "EventTooLarge";
  }
}

/**
 * A live stream beyond the caller's share (STREAM_MAX_PER_USER) or the process's
 * (STREAM_MAX_PER_PROCESS): answered 429 with Retry-After.
 */
export class TooManyStreams extends Error {
  constructor(
    readonly cap: "user" | "process",
    readonly retryAfterSeconds: number,
  ) {
    super(
      cap === "user"
        ? "Too many open streams for this user: close one (another tab or a forgotten EventSource) or retry after Retry-After seconds."
        : "This server holds as many open streams as it accepts: retry after Retry-After seconds.",
    );
    this.name = "TooManyStreams";
  }
}

/**
 * A send over the user's budget (src/history/usage.ts): answered 429 with Retry-After until the
 * period resets, the reset time, the period's usage and its limit. Nothing was sent.
 */
export class BudgetExceeded extends Error {
  constructor(readonly refusal: BudgetRefusal) {
    super(
      `Usage budget reached: this ${refusal.period}'s usage (${refusal.usage.tokens} tokens, $${refusal.usage.costUsd.toFixed(4)}) ` +
        `has reached its limit; nothing was sent. Sending is possible again at ${refusal.resetAt.toISOString()}, or when the operator raises the budget.`,
    );
    this.name = "BudgetExceeded";
  }
}

const refusalStatus: Record<HistoryRefusal["code"], ContentfulStatusCode> = {
  thread_not_owned: 404,
  thread_not_found: 404,
  thread_deleted: 409,
  message_not_found: 404,
  message_conflict: 409,
  message_not_on_path: 409,
  no_running_turn: 409,
  thread_busy: 409,
  branch_on_path: 409,
  not_a_user_message: 422,
  not_an_answer: 422,
};

/**
 * Another user's thread is answered exactly like one that does not exist (same status, same
 * body), so a caller cannot learn which thread ids exist.
 */
const threadNotFound = {
  error: "Thread not found: no thread with this id belongs to you.",
  code: "thread_not_found",
} as const;
const hidesOwnership = (code: HistoryRefusal["code"]) => code === "thread_not_owned" || code === "thread_not_found";

/**
 * The bodies of the error answers, as /openapi.json documents them: every one has `error`, a
 * sentence saying what went wrong and what to do; some add a machine-readable `code`.
 */
const errorText = z.string().meta({ description: "What went wrong and what to do about it." });
const fieldIssues = z.array(
  z.object({
    field: z
      .string()
      .meta({ description: 'The field as a dotted path (e.g. "messages.0.content"); "body" for the body as a whole.' }),
    message: z.string(),
  }),
);
const refusalCodes = (status: ContentfulStatusCode) =>
  Object.entries(refusalStatus)
    .filter(([code, codeStatus]) => codeStatus === status && !hidesOwnership(code as HistoryRefusal["code"]))
    .map(([code]) => code);

export const invalidRequestBody = z
  .object({ error: errorText, issues: fieldIssues.min(1) })
  .meta({ id: "InvalidRequest" });
export const unauthenticatedBody = z
  .object({ error: errorText, code: z.literal("unauthenticated") })
  .meta({ id: "Unauthenticated" });
export const notFoundBody = z
  .object({
    error: errorText,
    code: z.enum(["thread_not_found", "memory_not_found", "realtime_off", ...refusalCodes(404)]),
  })
  .meta({ id: "NotFound" });
export const conflictBody = z
  .object({
    error: errorText,
    code: z.enum(refusalCodes(409)),
    runningTurn: z
      .object({ runId: z.string(), messageId: z.uuid() })
      .optional()
      .meta({ description: "thread_busy: the turn the thread is answering (its run and user message)." }),
  })
  .meta({ id: "Conflict" });
export const tooLargeBody = z.object({ error: errorText, issues: fieldIssues.optional() }).meta({ id: "TooLarge" });
export const unsupportedMediaTypeBody = z.object({ error: errorText }).meta({ id: "UnsupportedMediaType" });
export const unprocessableBody = z
  .object({ error: errorText, code: z.enum(refusalCodes(422)) })
  .meta({ id: "Unprocessable" });
/** The client's address sent too many refused credentials (src/auth/failure-limit.ts): answered before any route. */
export const tooManyFailuresBody = z
  .object({ error: errorText, code: z.literal("too_many_failures") })
  .meta({ id: "TooManyFailures" });
export const tooManyStreamsBody = z
  .object({ error: errorText, code: z.literal("too_many_streams") })
  .meta({ id: "TooManyStreams" });
export const budgetExceededBody = z
  .object({
    error: errorText,
    code: z.literal("budget_exceeded"),
    period: z.enum(["day", "month"]).meta({ description: "The UTC day or month whose limit is reached." }),
    resetAt: z.iso.datetime().meta({ description: "When the period ends and sending is possible again." }),
    usage: z.object({ tokens: z.number(), costUsd: z.number() }).meta({ description: "The period's usage so far." }),
    limit: z
      .object({ tokens: z.number().optional(), costUsd: z.number().optional() })
      .meta({ description: "The period's limits (tokens: input + output; cost in US dollars)." }),
  })
  .meta({ id: "BudgetExceeded" });
export const serverFaultBody = z.object({ error: errorText, requestId: z.string() }).meta({ id: "ServerFault" });
export const unavailableBody = z
  .union([serverFaultBody, z.object({ error: errorText, code: z.literal("auth_unavailable") })])
  .meta({
    id: "Unavailable",
    description:
      "Inngest could not be reached (with the request id), or the identity provider's keys could not be fetched (auth_unavailable).",
  });

/**
 * The app's error handler: storage refusals become their 4xx, a body that is not JSON a 400, an
 * event over Inngest's size limit a 413, an unsent event a 503; anything else is a server fault
 * (500). A 5xx body never carries the fault's own text (database or Inngest internals): that is
 * logged with the request id, and the body says what to do and gives the id.
 */
export function answerError(error: Error, c: Context<AppEnv>) {
  const requestId = c.get("requestId");
  if (error instanceof HistoryRefusal && hidesOwnership(error.code)) return c.json(threadNotFound, 404);
  if (error instanceof ThreadBusy)
    return c.json({ error: error.message, code: error.code, runningTurn: error.runningTurn }, 409);
  if (error instanceof HistoryRefusal)
    return c.json({ error: error.message, code: error.code }, refusalStatus[error.code]);
  if (error instanceof EventTooLarge) return c.json({ error: error.message }, 413);
  if (error instanceof TooManyStreams) {
    c.header("Retry-After", String(error.retryAfterSeconds));
    return c.json({ error: error.message, code: "too_many_streams" as const }, 429);
  }
  if (error instanceof BudgetExceeded) {
    const { period, resetAt, usage, limit } = error.refusal;
    c.header("Retry-After", String(Math.max(1, Math.ceil((resetAt.getTime() - Date.now()) / 1000))));
    return c.json(
      {
        error: error.message,
        code: "budget_exceeded" as const,
        period,
        resetAt: resetAt.toISOString(),
        usage,
        limit,
      } satisfies z.infer<typeof budgetExceededBody>,
      429,
    );
  }
  if (error instanceof EventNotSent)
    return unavailable(
      c,
      error.cause,
      "event not sent to Inngest",
      "The request was not accepted: Threadline could not hand it to Inngest, its event service. Nothing was stored: " +
        `send the same request again in a few seconds. If it keeps failing, the operator should check that ${error.advice}; request id ${requestId}.`,
    );
  if (error instanceof RealtimeUnavailable)
    return unavailable(
      c,
      error.cause,
      "realtime subscription token not issued",
      "No realtime subscription token: Threadline could not reach Inngest realtime. Ask again in a few seconds; if it keeps failing, the operator " +
        `should check that Inngest is reachable (INNGEST_SIGNING_KEY for Inngest Cloud, or the dev server running); request id ${requestId}.`,
    );
  if (error instanceof HTTPException && error.status === 400)
    return invalid(c, [{ field: "body", message: error.message }]);
  if (error instanceof HTTPException && error.status < 500) return error.getResponse();
  logger.error({ requestId, err: error }, "request failed");
  return c.json(
    {
      error: `Internal server error: the request may be sent again later; if it keeps failing, give the operator request id ${requestId}.`,
      requestId,
    },
    500,
  );
}

/** A 503 to retry in a few seconds: the cause is logged with the request id, which the body gives. */
function unavailable(c: Context<AppEnv>, cause: unknown, logged: string, text: string) {
  const requestId = c.get("requestId");
  logger.error({ requestId, err: cause }, logged);
  c.header("Retry-After", "5");
  return c.json({ error: text, requestId }, 503);
}
