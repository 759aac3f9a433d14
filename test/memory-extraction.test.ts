import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { EXTRACTOR_SYSTEM_PROMPT } from "../src/agents/extractor.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createExtractMemories } from "../src/functions/extract-memories.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, hasLoneSurrogate, scriptedModel } from "./helpers/fixtures.js";
import { createTestApp, headersFor } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

let extracting: ReturnType<typeof createChatTurn>;
let extractMemories: ReturnType<typeof createExtractMemories>;

beforeAll(() => {
  const deps = {
    db: bed.db.pool,
    model: scriptedModel(bed.model),
    agents: {
      network: "assistant" as const,
      memory: { agents: { assistant: ["user-memory" as const] }, contextTokens: 500, extract: true },
    },
  };
  extracting = createChatTurn(deps);
  extractMemories = createExtractMemories(deps);
});

const memoriesOf = async (userId: string) =>
  (
    await bed.db.pool.query("SELECT text, source, thread_id FROM user_memories WHERE user_id = $1 ORDER BY text", [
      userId,
    ])
  ).rows;

describe("memory extraction (MEMORY_EXTRACTION)", () => {
  it("off by default: a completed turn requests no extraction", async () => {
    bed.model.script({ text: "Hello." });
    const run = await execute(
      createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) }),
      chatEvent({ content: "I live in Porto." }),
    );
    expect(run.sentEvents.filter((e) => e.name === "memory/extract.requested")).toEqual([]);
  });

  it("proposes facts from a completed turn in its own function, stores them once as memories of that thread, and they go with the thread", async () => {
    const userId = `user-${randomUUID()}`;
    bed.model.script({ text: "Porto is lovely." });
    const turn = await execute(extracting, chatEvent({ userId, content: "I live in Porto and I am vegetarian." }));
    expect(turn.error).toBeUndefined();
    const [request] = turn.sentEvents.filter((e) => e.name === "memory/extract.requested");
    const threadId = (turn.result as { threadId: string }).threadId;
    expect(request!.data).toEqual({ threadId, userId, messageId: threadId });

    bed.model.reset();
    bed.model.script({ text: "- Lives in Porto\n- Is vegetarian" });
    const extraction = await execute(extractMemories, request!);
    expect(extraction.error).toBeUndefined();
    expect(bed.model.requests[0]!.messages).toEqual([
      { role: "system", content: EXTRACTOR_SYSTEM_PROMPT },
      {
        role: "user",
        content:
          "<user_message>\nI live in Porto and I am vegetarian.\n</user_message>\n\n<assistant_message>\nPorto is lovely.\n</assistant_message>",
      },
    ]);
    expect(await memoriesOf(userId)).toEqual([
      { text: "Is vegetarian", source: "extracted", thread_id: threadId },
      { text: "Lives in Porto", source: "extracted", thread_id: threadId },
    ]);

    // A re-run proposes the same facts: nothing new is stored.
    bed.model.script({ text: "- Lives in Porto" });
    expect((await execute(extractMemories, request!)).result).toMatchObject({
      status: "extracted",
      proposed: 1,
      stored: 0,
    });
    expect(await memoriesOf(userId)).toHaveLength(2);

    await bed.db.pool.query("DELETE FROM threads WHERE id = $1", [threadId]);
    expect(await memoriesOf(userId)).toEqual([]);
  });

  it("proposes nothing for another user's thread", async () => {
    const userId = `user-${randomUUID()}`;
    bed.model.script({ text: "Hi." });
    const turn = await execute(extracting, chatEvent({ userId, content: "I am a pilot." }));
    const threadId = (turn.result as { threadId: string }).threadId;
    const run = await execute(extractMemories, {
      name: "memory/extract.requested",
      data: { threadId, userId: "someone-else", messageId: threadId },
    });
    expect(run.result).toMatchObject({ status: "gone", stored: 0 });
    expect(await memoriesOf("someone-else")).toEqual([]);
  });

  it("proposes nothing from a message the user edited away before the extraction ran", async () => {
    const userId = `user-${randomUUID()}`;
    bed.model.script({ text: "Paris is lovely." });
    const turn = await execute(extracting, chatEvent({ userId, content: "I live in Paris." }));
    const threadId = (turn.result as { threadId: string }).threadId;
    const [request] = turn.sentEvents.filter((e) => e.name === "memory/extract.requested");

    // The user corrects the message before its extraction runs (it waits behind the user's others).
    bed.model.reset();
    bed.model.script({ text: "Berlin is lovely." });
    const edit = await execute(extracting, {
      name: "chat/message.sent",
      data: { userId, threadId, messageId: randomUUID(), content: "I live in Berlin.", edits: threadId },
    });
    expect(edit.error).toBeUndefined();

    bed.model.reset();
    bed.model.script({ text: "- Lives in Paris" });
    const run = await execute(extractMemories, request!);
    expect(run.result).toMatchObject({ status: "gone", stored: 0 });
    expect(bed.model.requests).toHaveLength(0);
    expect(await memoriesOf(userId)).toEqual([]);
  });

  it("stores no memory when the model says, as a list item, that there is nothing", async () => {
    const userId = `user-${randomUUID()}`;
    bed.model.script({ text: "Hi there." });
    const turn = await execute(extracting, chatEvent({ userId, content: "What time is it in Tokyo?" }));
    const [request] = turn.sentEvents.filter((e) => e.name === "memory/extract.requested");
    for (const answer of ["- NONE", "- None.", "* none"]) {
      bed.model.reset();
      bed.model.script({ text: answer });
      const run = await execute(extractMemories, request!);
      expect(run.result, answer).toMatchObject({ status: "extracted", stored: 0 });
    }
    expect(await memoriesOf(userId)).toEqual([]);
  });

  it("stores a fact the model writes with a NUL, U+FFFD in its place", async () => {
    const userId = `user-${randomUUID()}`;
    bed.model.script({ text: "Nice." });
    const turn = await execute(extracting, chatEvent({ userId, content: "I drink tea every morning." }));
    const [request] = turn.sentEvents.filter((e) => e.name === "memory/extract.requested");
    bed.model.reset();
    bed.model.script({ text: "- Drinks \u0000 tea every morning" });
    const run = await execute(extractMemories, request!);
    expect(run.error).toBeUndefined();
    expect(await memoriesOf(userId)).toMatchObject([{ text: "Drinks \uFFFD tea every morning", source: "extracted" }]);
  });

  it("never cuts an emoji in half in the request: strict providers refuse a lone surrogate (HTTP 400) on every retry", async () => {
    const userId = `user-${randomUUID()}`;
    const emojiAtCut = `${"a".repeat(3_999)}🍞 and more`;
    bed.model.script({ text: emojiAtCut });
    const turn = await execute(extracting, chatEvent({ userId, content: emojiAtCut }));
    const [request] = turn.sentEvents.filter((e) => e.name === "memory/extract.requested");
    bed.model.reset();
    bed.model.script({ text: "NONE" });
    expect((await execute(extractMemories, request!)).error).toBeUndefined();
    const sent = String(bed.model.requests[0]!.messages[1]!.content);
    expect(hasLoneSurrogate(sent)).toBe(false);
    expect(sent).toContain(`<user_message>\n${"a".repeat(3_999)}\n</user_message>`);
  });

  it("a memory the user deleted never comes back from a turn written before the deletion whose extraction ran late", async () => {
    const { app } = createTestApp(bed.db.pool);
    const userId = `user-${randomUUID()}`;
    bed.model.script({ text: "Porto is lovely." });
    const turn = await execute(extracting, chatEvent({ userId, content: "I live in Porto." }));
    const [late] = turn.sentEvents.filter((e) => e.name === "memory/extract.requested");

    // Before the extraction runs (queued behind the user's others, or retrying), the user forgets everything.
    const forgotten = await app.request("/api/memories", { method: "DELETE", headers: await headersFor(userId) });
    expect(forgotten.status).toBe(200);
    bed.model.reset();
    bed.model.script({ text: "- Lives in Porto" });
    expect((await execute(extractMemories, late!)).result).toMatchObject({ status: "extracted", stored: 0 });
    expect(await memoriesOf(userId)).toEqual([]);

    // What the user says after the deletion is remembered again.
    bed.model.reset();
    bed.model.script({ text: "Welcome to Lisbon." });
    const threadId = (turn.result as { threadId: string }).threadId;
    const next = await execute(extracting, chatEvent({ userId, threadId, content: "I moved to Lisbon." }));
    const [request] = next.sentEvents.filter((e) => e.name === "memory/extract.requested");
    bed.model.reset();
    bed.model.script({ text: "- Lives in Lisbon" });
    expect((await execute(extractMemories, request!)).result).toMatchObject({ stored: 1 });
    expect(await memoriesOf(userId)).toEqual([{ text: "Lives in Lisbon", source: "extracted", thread_id: threadId }]);
  });

  it("takes no fact from a reasoning model's <think> block, only from its answer", async () => {
    const userId = `user-${randomUUID()}`;
    bed.model.script({ text: "Nice." });
    const turn = await execute(extracting, chatEvent({ userId, content: "I cycle to work." }));
    const [request] = turn.sentEvents.filter((e) => e.name === "memory/extract.requested");
    bed.model.reset();
    bed.model.script({ text: "<think>\nCandidates:\n- Lives in Porto?\n- Cycles to work\n</think>\n- Cycles to work" });
    expect((await execute(extractMemories, request!)).error).toBeUndefined();
    expect(await memoriesOf(userId)).toEqual([
      { text: "Cycles to work", source: "extracted", thread_id: expect.any(String) },
    ]);
  });
});
