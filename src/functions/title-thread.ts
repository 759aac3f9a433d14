import { NonRetriableError } from "inngest";
import { inngest, threadDeleted, turnFinished } from "../../inngest.config.js";
import { cleanTitle, createTitler, titleRequest } from "../agents/titler.js";
import { durably } from "../history/durable.js";
import { readTitleSource, storeModelTitle } from "../history/titles.js";
import type { FunctionDeps } from "./chat-turn.js";
import { ModelErrorMiddleware } from "../agents/model-errors.js";
import { inferenceMiddleware } from "./streaming-inference.js";
import { answerText } from "./turn-lifecycle.js";

/**
 * Names a thread after its first answer. Its own function, started by the turn's
 * threadline/turn.finished event, so a model failure here leaves the thread untitled and never
 * touches the chat turn. Every completed turn of an untitled thread asks; a turn of a titled
 * thread announces its finish only for a later turn that waits, and then this is a cheap no-op
 * (one read). A title the user set is never overwritten (storeModelTitle).
 */
export function createTitleThread({ db, model, inference }: FunctionDeps) {
  return inngest.createFunction(
    {
      id: "title-thread",
      name: "Title thread",
      triggers: [{ event: turnFinished, if: "event.data.status == 'completed'" }],
      // Quick turns in a new thread make one title request, soon after the first answer.
      debounce: { key: "event.data.threadId", period: "5s", timeout: "1m" },
      // A deleted thread's run is cancelled: no retry sends its first turn to the model again. A
      // turn's finish names no user; erasing one deletes (and announces) each of their threads.
      cancelOn: [{ event: threadDeleted, if: "async.data.threadId == event.data.threadId" }],
      retries: 2,
      // INFERENCE applies here as in the turn: under "stream" the Inngest server never calls the model.
      middleware: [ModelErrorMiddleware, inferenceMiddleware(db, inference ?? "gateway")],
    },
    async ({ event, step }) => {
      const { threadId, status } = event.data;
      if (status !== "completed") return { threadId, status: "skipped" as const };
      if (!model.configured) throw new NonRetriableError(model.reason);

      const source = await durably(step, "title.load", () => readTitleSource(db, threadId));
      if (source.status !== "ready") return { threadId, status: source.status };

      // The inference is its own step (step.ai.infer, or this process's step.run under INFERENCE=stream).
      const result = await createTitler(model).run(titleRequest(source.question, source.answer));
      const title = cleanTitle(answerText(result));
      if (!title) throw new Error("The model answered the title request with no text");

      const { stored } = await step.run("title.store", () => storeModelTitle(db, threadId, title));
      return { threadId, status: stored ? ("titled" as const) : ("kept" as const), title };
    },
  );
}
