import { Hono } from "hono";
import { describeRoute } from "hono-openapi";
import { z } from "zod";
import { chatMessageSentData } from "../../inngest.config.js";
import { callerId, userIdNotAccepted, type AuthEnv } from "../auth/identity.js";
import { deleteBranch, switchBranch } from "../history/branches.js";
import type { ApiDeps } from "./deps.js";
import { badRequest } from "./errors.js";
import { apiErrors, jsonResponse } from "./openapi.js";
import { sendEdit } from "./send-message.js";
import { validate } from "./validate.js";

const messageParams = z.object({
  threadId: z.uuid({ error: "threadId must be a UUID" }),
  messageId: z.uuid({ error: "messageId must be the UUID of a message of the thread" }),
});

const editBody = chatMessageSentData
  .pick({ messageId: true, content: true, clientTimestamp: true, history: true })
  .extend({ userId: userIdNotAccepted });

const editAcceptedResponse = z.object({
  threadId: z.uuid(),
  messageId: z.uuid().meta({ description: "The new user message (the client's id), answered in Inngest." }),
  edits: z.uuid().meta({ description: "The edited user message: its branch stays, off the current path." }),
  eventId: z.string().meta({ description: "The id of the chat/message.sent event Inngest received." }),
});

const switchedResponse = z.object({
  threadId: z.uuid(),
  messageId: z.uuid().meta({ description: "The message whose branch is now the current path." }),
  changed: z.int().meta({ description: "Messages that joined or left the current path (0: it was current already)." }),
});

const branchDeletedResponse = z.object({
  threadId: z.uuid(),
  messageId: z.uuid(),
  deleted: z.literal(true),
});

/**
 * The conversation tree's routes: edit a user message into a new branch, make a branch the
 * current path, delete a branch off it. While a turn runs on the thread each is refused (409
 * thread_busy, naming the running turn).
 */
export function branchRoutes(deps: ApiDeps) {
  const { db } = deps;
  return new Hono<AuthEnv>()
    .post(
      "/:threadId/messages/:messageId/edit",
      describeRoute({
        operationId: "editMessage",
        tags: ["Chat"],
        summary:
          "Edit a user message: a new message (the client's id) as its sibling, answered with the history before it; the old branch stays",
        responses: {
          202: jsonResponse("Accepted: the edited message is answered in Inngest.", editAcceptedResponse),
          ...apiErrors(400, 404, 409, 413, 415, 422),
        },
      }),
      validate("param", messageParams),
      validate("json", editBody),
      async (c) => {
        const { threadId, messageId: edits } = c.req.valid("param");
        const body = c.req.valid("json");
        if (body.messageId === edits)
          return badRequest(c, {
            issues: [{ path: ["messageId"], message: "messageId must be a new id for the edited message" }],
          });
        const sent = await sendEdit(deps, { ...body, threadId, edits, userId: callerId(c) });
        return c.json({ ...sent, edits } satisfies z.infer<typeof editAcceptedResponse>, 202);
      },
    )
    .put(
      "/:threadId/messages/:messageId/current",
      describeRoute({
        operationId: "switchBranch",
        tags: ["Threads"],
        summary: "Make the branch through a message (a user message or an answer variant) the thread's current path",
        responses: {
          200: jsonResponse("The path switched.", switchedResponse),
          ...apiErrors(400, 404, 409, 413, 415),
        },
      }),
      validate("param", messageParams),
      async (c) => {
        const { threadId, messageId } = c.req.valid("param");
        const { changed } = await switchBranch(db, { threadId, messageId, userId: callerId(c) });
        return c.json({ threadId, messageId, changed } satisfies z.infer<typeof switchedResponse>);
      },
    )
    .delete(
      "/:threadId/messages/:messageId/branch",
      describeRoute({
        operationId: "deleteBranch",
        tags: ["Threads"],
        summary:
          "Delete a branch off the current path: a user message or an answer variant, with everything that follows it",
        responses: {
          200: jsonResponse("Deleted.", branchDeletedResponse),
          ...apiErrors(400, 404, 409, 413, 415),
        },
      }),
      validate("param", messageParams),
      async (c) => {
        const { threadId, messageId } = c.req.valid("param");
        await deleteBranch(db, { threadId, messageId, userId: callerId(c) });
        return c.json({ threadId, messageId, deleted: true as const } satisfies z.infer<typeof branchDeletedResponse>);
      },
    );
}
