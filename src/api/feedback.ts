import { Hono } from "hono";
import { describeRoute } from "hono-openapi";
import { z } from "zod";
import { feedbackEventId, messageFeedbackGiven, type MessageFeedbackGiven } from "../../inngest.config.js";
import { callerId, userIdNotAccepted, type AuthEnv } from "../auth/identity.js";
import { deleteFeedback, putFeedback } from "../history/feedback.js";
import { turnUsage } from "../history/usage.js";
import { safeString } from "../history/safe-text.js";
import { logger } from "../platform/logger.js";
import type { ApiDeps } from "./deps.js";
import { apiErrors, jsonResponse } from "./openapi.js";
import { validate } from "./validate.js";

/** Longest feedback comment accepted, in characters: a remark, not a document. */
const MAX_COMMENT_LENGTH = 2_000;

const answerParams = z.object({
  threadId: z.uuid({ error: "threadId must be a UUID" }),
  answerId: z.uuid({ error: "answerId must be the UUID of an assistant message of the thread" }),
});

const feedbackBody = z.object({
  rating: z.enum(["up", "down"], { error: 'rating must be "up" or "down"' }),
  comment: safeString({ error: "comment must be a string (or null, or left out)" })
    .trim()
    .max(MAX_COMMENT_LENGTH, `comment must be at most ${MAX_COMMENT_LENGTH} characters`)
    .nullable()
    .optional()
    .meta({ description: "Why, in the user's words. Absent, null or blank: no comment." }),
  userId: userIdNotAccepted,
});

/** An answer's feedback as every route shows it (the messages API's assistant messages too). */
export const answerFeedback = z.object({
  rating: z.enum(["up", "down"]),
  comment: z.string().nullable(),
  updatedAt: z.iso.datetime().meta({ description: "When this rating or comment was given." }),
});

const feedbackGivenResponse = z.object({
  threadId: z.uuid(),
  answerId: z.uuid(),
  feedback: answerFeedback,
  announced: z.boolean().meta({
    description:
      "message/feedback.given was handed to Inngest. false: Inngest was unreachable; the rating stands, and the same request sent again announces it (once).",
  }),
});

const feedbackDeletedResponse = z.object({
  threadId: z.uuid(),
  answerId: z.uuid(),
  deleted: z.boolean().meta({ description: "false: the answer had no feedback of the caller's." }),
});

/**
 * An answer's feedback: PUT gives or replaces the caller's rating (one per answer), DELETE removes
 * it. Only the thread's owner rates its answers; another user's thread answers 404, like one that
 * does not exist. A given rating is stored first (one statement), then announced
 * (message/feedback.given, with the run and model that wrote the answer), like a thread deletion.
 */
export function feedbackRoutes({ db, sendEvent }: ApiDeps) {
  return new Hono<AuthEnv>()
    .put(
      "/:threadId/messages/:answerId/feedback",
      describeRoute({
        operationId: "putAnswerFeedback",
        tags: ["Threads"],
        summary:
          "Rates an answer thumbs up or down, with an optional comment: one rating per answer, replaced by the next, announced as message/feedback.given",
        responses: {
          200: jsonResponse("Stored (a rating already there is replaced).", feedbackGivenResponse),
          ...apiErrors(400, 404, 413, 415, 422),
        },
      }),
      validate("param", answerParams),
      validate("json", feedbackBody),
      async (c) => {
        const { threadId, answerId } = c.req.valid("param");
        const { rating, comment } = c.req.valid("json");
        const userId = callerId(c);
        const stored = await putFeedback(db, { threadId, answerId, userId, rating, comment: comment || null });
        const usage = stored.runId === null ? undefined : await turnUsage(db, stored.runId);
        const announced = await sendEvent({
          id: feedbackEventId(answerId, stored.version),
          name: messageFeedbackGiven.name,
          data: {
            threadId,
            answerId,
            userId,
            rating: stored.rating,
            comment: stored.comment,
            runId: stored.runId,
            model: stored.model,
            version: stored.version,
            usage: usage ?? null,
          } satisfies MessageFeedbackGiven,
        }).then(
          () => true,
          (error: unknown) => {
            logger.error(
              { threadId, answerId, err: error },
              "feedback stored, but message/feedback.given could not be sent",
            );
            return false;
          },
        );
        const { rating: given, comment: said, updatedAt } = stored;
        return c.json({
          threadId,
          answerId,
          feedback: { rating: given, comment: said, updatedAt },
          announced,
        } satisfies z.infer<typeof feedbackGivenResponse>);
      },
    )
    .delete(
      "/:threadId/messages/:answerId/feedback",
      describeRoute({
        operationId: "deleteAnswerFeedback",
        tags: ["Threads"],
        summary: "Removes the caller's rating of an answer (not announced)",
        responses: {
          200: jsonResponse("Removed, or there was none.", feedbackDeletedResponse),
          ...apiErrors(400, 404, 413, 415, 422),
        },
      }),
      validate("param", answerParams),
      async (c) => {
        const { threadId, answerId } = c.req.valid("param");
        const { deleted } = await deleteFeedback(db, { threadId, answerId, userId: callerId(c) });
        return c.json({ threadId, answerId, deleted } satisfies z.infer<typeof feedbackDeletedResponse>);
      },
    );
}
