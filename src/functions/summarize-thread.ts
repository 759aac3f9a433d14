import { NonRetriableError } from "inngest";
import { inngest, threadSummarizeRequested } from "../../inngest.config.js";
import { withoutReasoning } from "../agents/one-inference-agent.js";
import { createSummarizer, summarizeRequest } from "../agents/summarizer.js";
import { durably } from "../history/durable.js";
import { readSummarySource, storeSummary } from "../history/summaries.js";
import type { FunctionDeps } from "./chat-turn.js";
import { ModelErrorMiddleware } from "../agents/model-errors.js";
import { inferenceMiddleware } from "./streaming-inference.js";
import { answerText, cancelBesideTurnOnDeletion } from "./turn-lifecycle.js";

/** Messages one summarization reads at most: bounds the step's output and the model's input. */
const SUMMARY_BATCH_MESSAGES = 200;

/**
 * Progressive summarization of one thread: reads the summary so far and the oldest turns outside
 * the requesting turn's window that it does not cover, asks the model to extend it, and stores
 * the result. Chat turns only send the event, so a failure here never holds up a conversation;
 * the turns left out simply wait for the next request.
 */
export function createSummarizeThread({ db, model, inference }: FunctionDeps) {
  return inngest.createFunction(
    {
      id: "summarize-thread",
      name: "Summarize thread",
      triggers: [threadSummarizeRequested],
      // A burst of turns makes one summary once the thread goes quiet, and a busy thread still gets one every 10 minutes.
      debounce: { key: "event.data.threadId", period: "2m", timeout: "10m" },
      // Two summarizers of one thread would both extend the same previous summary.
      concurrency: { key: "event.data.threadId", limit: 1 },
      cancelOn: cancelBesideTurnOnDeletion,
      retries: 3,
      // INFERENCE applies here as in the turn: under "stream" the Inngest server never calls the model.
      middleware: [ModelErrorMiddleware, inferenceMiddleware(db, inference ?? "gateway")],
    },
    // The SDK validates event.data against the trigger's schema before this runs (non-retriable).
    async ({ event, step }) => {
      const data = event.data;
      if (!model.configured) throw new NonRetriableError(model.reason);

      // The request is rendered inside the step, so what the step stores is bounded text, not raw rows.
      const source = await durably(step, "summary.load", async () => {
        const { previous, messages, pathVersion } = await readSummarySource(db, {
          ...data,
          maxMessages: SUMMARY_BATCH_MESSAGES,
        });
        if (messages.length === 0) return null;
        return {
          extends: previous?.coversThrough ?? null,
          pathVersion,
          coversThrough: messages.at(-1)!.turnSeq,
          messageCount: messages.length,
          request: summarizeRequest(previous?.text ?? null, messages),
        };
      });
      if (!source) return { threadId: data.threadId, status: "up-to-date" as const };

      const result = await createSummarizer(model).run(source.request);
      const text = withoutReasoning(answerText(result)).trim();
      if (!text) throw new Error("The model answered the summarize request with no text");

      const { stored } = await step.run("summary.store", () =>
        storeSummary(db, {
          threadId: data.threadId,
          coversThrough: source.coversThrough,
          text,
          extends: source.extends,
          pathVersion: source.pathVersion,
        }),
      );
      return {
        threadId: data.threadId,
        status: stored ? ("stored" as const) : ("superseded" as const),
        coversThroughSeq: source.coversThrough,
        messagesSummarized: source.messageCount,
      };
    },
  );
}
