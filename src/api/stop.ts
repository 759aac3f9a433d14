import { Hono } from "hono";
import { describeRoute } from "hono-openapi";
import { z } from "zod";
import { turnFinished, turnStopRequested, type TurnFinished, type TurnStopRequested } from "../../inngest.config.js";
import { ASSISTANT_NAME } from "../agents/assistant.js";
import { callerId, userIdNotAccepted, type AuthEnv } from "../auth/identity.js";
import { stopRunningTurn } from "../history/turns.js";
import { logger } from "../platform/logger.js";
import type { ApiDeps } from "./deps.js";
import { apiErrors, jsonResponse } from "./openapi.js";
import { validate } from "./validate.js";

const threadParams = z.object({ threadId: z.uuid({ error: "threadId must be a UUID" }) });
const stopBody = z.object({
  messageId: z
    .uuid({ error: "messageId must be the UUID of the user message whose answer is being generated" })
    .meta({
      description:
        "Stop only the turn answering this user message (the one the client shows arriving); absent: the turn the thread is answering now.",
    })
    .optional(),
  userId: userIdNotAccepted,
});

const turnStoppedResponse = z.object({
  threadId: z.uuid(),
  runId: z.string().meta({ description: "The stopped turn's Inngest run." }),
  messageId: z.uuid().meta({ description: "The user message the stopped turn was answering." }),
  variant: z.int().meta({ description: "The answer variant the turn was writing." }),
  stopped: z.literal(true),
  answerStored: z.boolean().meta({
    description:
      "What the model had streamed was stored as the answer, marked `stopped: true`; false: nothing had been streamed.",
  }),
  announced: z.boolean().meta({
    description:
      "The run's cancellation was handed to Inngest. false: Inngest was unreachable; the stop stands, the run goes on until it would store its answer, which it then drops.",
  }),
});

/**
 * POST /api/threads/:threadId/stop: the thread's running turn is recorded as stopped with what it
 * streamed so far (one statement, src/history/turns.ts), then the run is cancelled
 * (chat/turn.stop.requested, the turn functions' cancelOn) and a later turn waiting for it is
 * released (threadline/turn.finished, under the id the run itself would send it with). The stop
 * stands once recorded: the events are announced after it, like a thread deletion.
 */
export function stopRoutes({ db, sendEvent }: ApiDeps) {
  return new Hono<AuthEnv>().post(
    "/:threadId/stop",
    describeRoute({
      operationId: "stopTurn",
      tags: ["Chat"],
      summary:
        "Stops the thread's running turn: its partial answer is stored, marked stopped, and the thread is free for the next message",
      responses: {
        202: jsonResponse(
          "Stopped: the turn is recorded as stopped and its run is being cancelled in Inngest.",
          turnStoppedResponse,
        ),
        ...apiErrors(400, 404, 409, 413, 415),
      },
    }),
    validate("param", threadParams),
    validate("json", stopBody),
    async (c) => {
      const { threadId } = c.req.valid("param");
      const userId = callerId(c);
      // The agent that answers the user in every network: what it streamed is the partial answer.
      const turn = await stopRunningTurn(db, {
        threadId,
        userId,
        messageId: c.req.valid("json").messageId,
        agentName: ASSISTANT_NAME,
      });
      const { runId, messageId } = turn;
      const announced = await Promise.all([
        sendEvent({
          id: `turn-stop-${runId}`,
          name: turnStopRequested.name,
          data: { threadId, userId, runId, messageId } satisfies TurnStopRequested,
        }),
        sendEvent({
          id: `turn-finished-${runId}`,
          name: turnFinished.name,
          data: { threadId, runId, messageId, status: "stopped" } satisfies TurnFinished,
        }),
      ]).then(
        () => true,
        (error: unknown) => {
          logger.error(
            { threadId, runId, err: error },
            "turn stopped, but its cancellation could not be sent to Inngest",
          );
          return false;
        },
      );
      return c.json(
        { threadId, ...turn, stopped: true as const, announced } satisfies z.infer<typeof turnStoppedResponse>,
        202,
      );
    },
  );
}
