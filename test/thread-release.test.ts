import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createModelInference } from "../src/functions/model-inference.js";
import { createTurnCancellation } from "../src/functions/turn-lifecycle.js";
import { turnsOf, scriptedModel } from "./helpers/fixtures.js";
import { headersFor } from "./helpers/http.js";
import { startLiveEngine, type LiveEngine } from "./helpers/live-engine.js";
import { useTestBed } from "./helpers/test-bed.js";

/**
 * A stopped turn frees its thread at once under gateway inference. On the real engine an in-flight
 * AI gateway request holds a concurrency key even after its run is cancelled (BRIEF.md's engine
 * facts), so the turn functions hold none (test/concurrency.test.ts) and the next turn's only gate
 * is the durable wait, which a stopped turn no longer holds. The stand-in performs the gateway
 * request itself; the stopped run's request is still in flight when the next turn answers.
 */
const bed = useTestBed();
let live: LiveEngine | undefined;
afterEach(async () => {
  await live?.close();
  live = undefined;
});

const SLOW_ANSWER_MS = 6_000;

describe("after a stop mid-answer under gateway inference", () => {
  it("the thread's next message runs and answers while the stopped run's inference is still in flight, without waiting for it", async () => {
    const deps = { db: bed.db.pool, model: scriptedModel(bed.model), inference: "gateway" as const };
    live = await startLiveEngine(bed.db.pool, [
      createChatTurn(deps),
      createTurnCancellation(deps),
      createModelInference(deps),
    ]);
    const { engine, appUrl } = live;
    const headers = await headersFor("user-1");
    bed.model.script(
      { text: "A long answer that never arrives in time.", delayMs: SLOW_ANSWER_MS },
      { text: "Here is the next answer." },
    );

    const threadId = randomUUID();
    expect(
      (
        await fetch(`${appUrl}/api/chat`, {
          method: "POST",
          headers,
          body: JSON.stringify({ messageId: threadId, content: "Tell me a long story." }),
        })
      ).status,
    ).toBe(202);
    const stopped = await engine.runFor(
      (r) => r.fnId === "threadline-chat-turn" && r.event.data.messageId === threadId,
    );
    while (bed.model.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));

    const stop = await fetch(`${appUrl}/api/threads/${threadId}/stop`, { method: "POST", headers, body: "{}" });
    expect(stop.status).toBe(202);
    const nextId = randomUUID();
    expect(
      (
        await fetch(`${appUrl}/api/chat`, {
          method: "POST",
          headers,
          body: JSON.stringify({ threadId, messageId: nextId, content: "Something short, then." }),
        })
      ).status,
    ).toBe(202);
    const next = await engine.runFor((r) => r.fnId === "threadline-chat-turn" && r.event.data.messageId === nextId);
    await next.ended;

    // The stopped run's gateway request has not returned yet: nothing waited for it.
    expect(stopped.inferences).toEqual([]);
    expect(next.status).toBe("completed");
    // The stop was recorded before the message was stored: it found no turn ahead, so looked for none.
    expect(next.order.map((s) => s.id)).not.toContain("history.wait-for-turn");
    expect(next.order.map((s) => s.id)).not.toContain("history.find-earlier-turn");
    expect(await turnsOf(bed.db.pool, nextId)).toMatchObject([{ status: "completed" }]);

    await stopped.ended;
    expect(stopped.status).toBe("cancelled");
    expect(await turnsOf(bed.db.pool, threadId)).toMatchObject([{ status: "stopped" }]);
  });
});

describe("two quick messages on one thread, with no concurrency key", () => {
  it("answer in order: the second run waits durably and is released by the first's turn.finished, then sees its answer", async () => {
    const deps = { db: bed.db.pool, model: scriptedModel(bed.model), inference: "gateway" as const };
    // Real time for waits: a release that came from a round's timeout would take 10 s.
    live = await startLiveEngine(
      bed.db.pool,
      [createChatTurn(deps), createTurnCancellation(deps), createModelInference(deps)],
      {
        msPerSecond: 1_000,
      },
    );
    const { engine, appUrl } = live;
    const headers = await headersFor("user-1");
    bed.model.script({ text: "Nice to meet you, Ada.", delayMs: 1_000 }, { text: "Your name is Ada." });

    const threadId = randomUUID();
    const secondId = randomUUID();
    const send = (body: Record<string, unknown>) =>
      fetch(`${appUrl}/api/chat`, { method: "POST", headers, body: JSON.stringify(body) });
    expect((await send({ messageId: threadId, content: "My name is Ada." })).status).toBe(202);
    const first = await engine.runFor((r) => r.event.data.messageId === threadId);
    // The second message once the first turn has begun (its message is stored), as a quick user sends it.
    while (!first.order.some((s) => s.id === "history.append-user-message"))
      await new Promise((resolve) => setTimeout(resolve, 5));
    expect((await send({ threadId, messageId: secondId, content: "What is my name?" })).status).toBe(202);
    const second = await engine.runFor((r) => r.event.data.messageId === secondId);
    await Promise.all([first.ended, second.ended]);

    expect([first.status, second.status]).toEqual(["completed", "completed"]);
    const waits = second.order.filter((s) => s.id.startsWith("history.wait-for-turn"));
    expect(waits.map((w) => w.id)).toEqual(["history.wait-for-turn"]);
    // Released by the event (the wait's result), not by its timeout (null).
    expect(second.steps[waits[0]!.hashedId]).toMatchObject({
      type: "data",
      data: { name: "threadline/turn.finished", data: { runId: first.runId } },
    });
    expect(bed.model.requests[1]!.messages.slice(-3)).toEqual([
      { role: "user", content: "My name is Ada." },
      { role: "assistant", content: "Nice to meet you, Ada." },
      { role: "user", content: "What is my name?" },
    ]);
  });
});
