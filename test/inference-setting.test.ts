import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { EXTRACTOR_NAME } from "../src/agents/extractor.js";
import { SUMMARIZER_NAME } from "../src/agents/summarizer.js";
import { TITLER_NAME } from "../src/agents/titler.js";
import { createChatTurn, type FunctionDeps } from "../src/functions/chat-turn.js";
import { createExtractMemories } from "../src/functions/extract-memories.js";
import { createSummarizeThread } from "../src/functions/summarize-thread.js";
import { createTitleThread } from "../src/functions/title-thread.js";
import type { Inference } from "../src/functions/streaming-inference.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, scriptedModel } from "./helpers/fixtures.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

const deps = (inference: Inference): FunctionDeps => ({
  db: bed.db.pool,
  model: scriptedModel(bed.model),
  inference,
  agents: { network: "assistant", memory: { agents: {}, contextTokens: 500, extract: true } },
});

/** A new thread's first turn, answered; returns the events it sent (turn.finished, memory extraction request). */
async function answeredTurn(inference: Inference, content: string) {
  bed.model.script({ text: "Start with an active starter." });
  const turn = await execute(createChatTurn(deps(inference)), chatEvent({ content, userId: `user-${randomUUID()}` }));
  expect(turn.error).toBeUndefined();
  bed.model.reset();
  const sent = (name: string) => turn.sentEvents.find((e) => e.name === name)!;
  return {
    threadId: (turn.result as { threadId: string }).threadId,
    finished: sent("threadline/turn.finished"),
    extraction: sent("memory/extract.requested"),
  };
}

describe("INFERENCE applies to every model call, not only the turn's", () => {
  it("stream: the title, the summary and the memory extraction are made by this process (a step.run), never by step.ai.infer", async () => {
    const { threadId, finished, extraction } = await answeredTurn("stream", "How do I bake sourdough bread?");

    bed.model.script({ text: "Baking Sourdough" });
    const title = await execute(createTitleThread(deps("stream")), finished);
    expect(title.result).toMatchObject({ status: "titled", title: "Baking Sourdough" });
    expect(title.aiInferSteps).toEqual([]);
    expect(title.stepIds).toEqual(["title.load", TITLER_NAME, "title.store"]);

    bed.model.script({ text: "The user asked about sourdough." });
    const userId = (
      await bed.db.pool.query<{ user_id: string }>("SELECT user_id FROM threads WHERE id = $1", [threadId])
    ).rows[0]!.user_id;
    // beforeSeq past the first turn: that turn lies outside the (pretend) window and is summarized.
    const summary = await execute(createSummarizeThread(deps("stream")), {
      name: "thread/summarize.requested",
      data: { threadId, userId, beforeSeq: 100 },
    });
    expect(summary.result).toMatchObject({ status: "stored", messagesSummarized: 2 });
    expect(summary.aiInferSteps).toEqual([]);
    expect(summary.stepIds).toEqual(["summary.load", SUMMARIZER_NAME, "summary.store"]);

    bed.model.script({ text: "- Bakes sourdough" });
    const memories = await execute(createExtractMemories(deps("stream")), extraction);
    expect(memories.result).toMatchObject({ status: "extracted", stored: 1 });
    expect(memories.aiInferSteps).toEqual([]);
    expect(memories.stepIds).toEqual(["memory.extract.load", EXTRACTOR_NAME, "memory.extract.store"]);

    // This process called the model, streaming, three times: no request was left for the Inngest server.
    expect(bed.model.requests.map((r) => r.stream)).toEqual([true, true, true]);
  });

  it("gateway: the same calls are step.ai.infer requests for the Inngest server", async () => {
    const { finished, extraction } = await answeredTurn("gateway", "What is a monad?");

    bed.model.script({ text: "Monads" });
    const title = await execute(createTitleThread(deps("gateway")), finished);
    expect(title.result).toMatchObject({ status: "titled" });
    expect(title.aiInferSteps).toEqual([TITLER_NAME]);

    bed.model.script({ text: "- Studies functional programming" });
    const memories = await execute(createExtractMemories(deps("gateway")), extraction);
    expect(memories.aiInferSteps).toEqual([EXTRACTOR_NAME]);
    expect(bed.model.requests.map((r) => r.stream ?? false)).toEqual([false, false]);
  });
});
