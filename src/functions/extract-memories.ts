import { NonRetriableError } from "inngest";
import { inngest, memoryExtractRequested } from "../../inngest.config.js";
import { createExtractor, extractionRequest, proposedFacts } from "../agents/extractor.js";
import { durably } from "../history/durable.js";
import { MAX_MEMORY_LENGTH, rememberFromThread, turnForExtraction } from "../history/memories.js";
import type { FunctionDeps } from "./chat-turn.js";
import { ModelErrorMiddleware } from "../agents/model-errors.js";
import { inferenceMiddleware } from "./streaming-inference.js";
import { answerText, cancelBesideTurnOnDeletion } from "./turn-lifecycle.js";

/**
 * Memory extraction (MEMORY_EXTRACTION, off by default): after a completed chat turn, proposes
 * lasting facts about the user from that turn and stores them as memories extracted from the
 * thread, deleted with it. Its own function, so it never slows or fails a turn. Idempotent: a
 * memory's id is derived from the user and the fact.
 */
export function createExtractMemories({ db, model, inference }: FunctionDeps) {
  return inngest.createFunction(
    {
      id: "extract-memories",
      name: "Extract memories",
      triggers: [memoryExtractRequested],
      // One user's extractions one at a time: the per-user memory limit is counted before each insert.
      concurrency: { key: "event.data.userId", limit: 1 },
      cancelOn: cancelBesideTurnOnDeletion,
      retries: 3,
      // INFERENCE applies here as in the turn: under "stream" the Inngest server never calls the model.
      middleware: [ModelErrorMiddleware, inferenceMiddleware(db, inference ?? "gateway")],
    },
    async ({ event, step }) => {
      const data = event.data;
      if (!model.configured) throw new NonRetriableError(model.reason);

      const request = await durably(step, "memory.extract.load", async () => {
        const turn = await turnForExtraction(db, data);
        return turn ? extractionRequest(turn.question, turn.answers) : null;
      });
      if (request === null) return { threadId: data.threadId, status: "gone" as const, stored: 0 };

      const result = await createExtractor(model).run(request);
      const facts = proposedFacts(answerText(result), MAX_MEMORY_LENGTH);
      const stored = await step.run("memory.extract.store", async () => {
        let count = 0;
        for (const text of facts) if ((await rememberFromThread(db, { ...data, text })).stored) count += 1;
        return count;
      });
      return { threadId: data.threadId, status: "extracted" as const, proposed: facts.length, stored };
    },
  );
}
