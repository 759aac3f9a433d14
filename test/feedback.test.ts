import { randomUUID } from "node:crypto";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { resultId } from "../src/history/ids.js";
import { conversation, scriptedModel, turnsOf } from "./helpers/fixtures.js";
import { createTestApp, headersFor, type SentEvent } from "./helpers/http.js";
import { storeAnsweredTurn } from "./helpers/seed.js";
import { useTestBed } from "./helpers/test-bed.js";

/**
 * Feedback on an answer (PUT/DELETE /api/threads/:threadId/messages/:answerId/feedback): the
 * owner's only, one per answer, replaceable and removable, shown in the messages API, and
 * announced as message/feedback.given with the run and model that wrote the answer, and its turn's usage.
 */
const bed = useTestBed();

let chatTurn: ReturnType<typeof createChatTurn>;
let app: ReturnType<typeof createTestApp>["app"];
let sent: SentEvent[];

beforeAll(() => {
  chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
  ({ app, sent } = createTestApp(bed.db.pool));
});
beforeEach(() => {
  sent.length = 0;
});

const feedbackPath = (threadId: string, answerId: string) => `/api/threads/${threadId}/messages/${answerId}/feedback`;

async function put(threadId: string, answerId: string, body: unknown, userId = "user-1") {
  return app.request(feedbackPath(threadId, answerId), {
    method: "PUT",
    headers: await headersFor(userId),
    body: JSON.stringify(body),
  });
}

async function remove(threadId: string, answerId: string, userId = "user-1") {
  return app.request(feedbackPath(threadId, answerId), { method: "DELETE", headers: await headersFor(userId) });
}

/** The stored feedback rows of an answer (at most one, by the primary key). */
async function rowsOf(answerId: string) {
  const { rows } = await bed.db.pool.query<{
    user_id: string;
    rating: string;
    comment: string | null;
    version: string;
  }>("SELECT user_id, rating, comment, version::text FROM message_feedback WHERE message_id = $1", [answerId]);
  return rows;
}

type Shown = { id: string; role: string; feedback?: unknown };
async function shownMessages(threadId: string, userId = "user-1"): Promise<Shown[]> {
  const response = await app.request(`/api/threads/${threadId}/messages`, { headers: await headersFor(userId) });
  expect(response.status).toBe(200);
  return ((await response.json()) as { messages: Shown[] }).messages;
}

/** A thread of one turn answered by the chat turn function (its turn records the run and the model). */
async function answeredTurn() {
  const { threadId, messageIds } = await conversation(chatTurn, bed.model, [["Say hi", "Hi"]]);
  const messageId = messageIds[0]!;
  const [turn] = await turnsOf(bed.db.pool, messageId);
  return { threadId, messageId, answerId: resultId(messageId, turn!.variant, 0), runId: turn!.run_id };
}

describe("feedback on an answer", () => {
  it("is stored, shown on the answer in the messages API, and announced with the run id, model and usage of the turn that wrote the answer", async () => {
    const { threadId, messageId, answerId, runId } = await answeredTurn();

    const response = await put(threadId, answerId, { rating: "up", comment: "  spot on " });

    expect(response.status).toBe(200);
    const body = (await response.json()) as { feedback: { updatedAt: string } };
    expect(body).toEqual({
      threadId,
      answerId,
      feedback: { rating: "up", comment: "spot on", updatedAt: expect.any(String) },
      announced: true,
    });
    const [row] = await rowsOf(answerId);
    expect(row).toMatchObject({ user_id: "user-1", rating: "up", comment: "spot on" });
    expect(sent).toEqual([
      {
        id: `feedback-${answerId}-${row!.version}`,
        name: "message/feedback.given",
        data: {
          threadId,
          answerId,
          userId: "user-1",
          rating: "up",
          comment: "spot on",
          runId,
          model: { provider: "openai", name: "scripted-model" },
          version: row!.version,
          // The turn's one model call as the scripted model reported it (it has no price).
          usage: {
            calls: 1,
            inputTokens: 100,
            outputTokens: 20,
            cachedTokens: 0,
            reasoningTokens: 0,
            totalTokens: 120,
            costUsd: null,
            model: "scripted-model",
          },
        },
      },
    ]);
    const messages = await shownMessages(threadId);
    expect(messages.map((m) => [m.id, m.role, m.feedback])).toEqual([
      [messageId, "user", undefined],
      [answerId, "assistant", { rating: "up", comment: "spot on", updatedAt: body.feedback.updatedAt }],
    ]);
  });

  it("is one per answer: a new rating replaces it (a new version, announced again), the same one sent again keeps its version and event id", async () => {
    const { threadId, answerId } = await answeredTurn();

    await put(threadId, answerId, { rating: "up" });
    const first = (await rowsOf(answerId))[0]!;
    await put(threadId, answerId, { rating: "up" });
    expect(await rowsOf(answerId)).toEqual([first]);
    const replaced = await put(threadId, answerId, { rating: "down", comment: "wrong year" });
    expect(replaced.status).toBe(200);

    const rows = await rowsOf(answerId);
    expect(rows).toEqual([{ user_id: "user-1", rating: "down", comment: "wrong year", version: expect.any(String) }]);
    expect(BigInt(rows[0]!.version)).toBeGreaterThan(BigInt(first.version));
    // A retried request is one event (Inngest drops a repeated id); the replacement is a new one.
    expect(sent.map((event) => [event.id, event.data.rating])).toEqual([
      [`feedback-${answerId}-${first.version}`, "up"],
      [`feedback-${answerId}-${first.version}`, "up"],
      [`feedback-${answerId}-${rows[0]!.version}`, "down"],
    ]);
    expect((await shownMessages(threadId)).find((m) => m.id === answerId)?.feedback).toMatchObject({
      rating: "down",
      comment: "wrong year",
    });
  });

  it("is deletable: DELETE removes it (the messages API shows null), again answers deleted: false; given again, it takes a version never used", async () => {
    const { threadId, answerId } = await answeredTurn();
    await put(threadId, answerId, { rating: "down" });
    const before = (await rowsOf(answerId))[0]!;

    const response = await remove(threadId, answerId);

    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ threadId, answerId, deleted: true });
    expect(await rowsOf(answerId)).toEqual([]);
    expect((await shownMessages(threadId)).find((m) => m.id === answerId)?.feedback).toBeNull();
    expect(await (await remove(threadId, answerId)).json()).toEqual({ threadId, answerId, deleted: false });
    // Not announced: only given ratings are.
    expect(sent).toHaveLength(1);

    await put(threadId, answerId, { rating: "down" });
    const again = (await rowsOf(answerId))[0]!;
    expect(BigInt(again.version)).toBeGreaterThan(BigInt(before.version));
    expect(sent.at(-1)?.id).toBe(`feedback-${answerId}-${again.version}`);
  });

  it("is the owner's only: another user's PUT and DELETE answer 404 like a missing thread, storing, removing and sending nothing", async () => {
    const { threadId, answerId } = await answeredTurn();
    await put(threadId, answerId, { rating: "up" });
    const owners = await rowsOf(answerId);
    sent.length = 0;

    const foreign = await put(threadId, answerId, { rating: "down" }, "intruder");
    expect(foreign.status).toBe(404);
    const foreignBody = await foreign.json();
    expect(foreignBody).toMatchObject({ code: "thread_not_found" });
    const missing = await put(randomUUID(), answerId, { rating: "down" }, "intruder");
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual(foreignBody);
    expect((await remove(threadId, answerId, "intruder")).status).toBe(404);

    expect(await rowsOf(answerId)).toEqual(owners);
    expect(sent).toEqual([]);
    // The intruder's own read of the thread is refused too.
    expect(
      (await app.request(`/api/threads/${threadId}/messages`, { headers: await headersFor("intruder") })).status,
    ).toBe(404);
  });

  it("rates answers only: a user message is refused with 422 saying so, an unknown message 404, a bad rating 400 — nothing stored or sent", async () => {
    const { threadId, messageId } = await answeredTurn();

    const user = await put(threadId, messageId, { rating: "up" });
    expect(user.status).toBe(422);
    const refusal = (await user.json()) as { code: string; error: string };
    expect(refusal.code).toBe("not_an_answer");
    expect(refusal.error).toMatch(/is a user message: feedback rates an answer/);
    expect((await remove(threadId, messageId)).status).toBe(422);

    const unknown = await put(threadId, randomUUID(), { rating: "up" });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ code: "message_not_found" });

    const bad = await put(threadId, resultId(messageId, 1, 0), { rating: "meh" });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toMatch(/rating must be "up" or "down"/);
    expect((await put(threadId, resultId(messageId, 1, 0), { rating: "up", userId: "user-2" })).status).toBe(400);

    const { rows } = await bed.db.pool.query("SELECT 1 FROM message_feedback WHERE thread_id = $1", [threadId]);
    expect(rows).toEqual([]);
    expect(sent).toEqual([]);
  });

  it("stands when Inngest is unreachable (announced: false), and the same request sent again announces it under the same id", async () => {
    const threadId = randomUUID();
    const { messageId, answerId } = await storeAnsweredTurn(bed.db.pool, {
      threadId,
      userId: "user-1",
      question: "Hi?",
      answer: "Hello.",
    });
    const attempts: SentEvent[] = [];
    let reachable = false;
    const flaky = createTestApp(bed.db.pool, {
      sendEvent: async (event) => {
        attempts.push(event);
        if (!reachable) throw new Error("connect ECONNREFUSED 127.0.0.1:8288");
        return { ids: ["evt-1"] };
      },
    }).app;
    const send = async () =>
      flaky.request(feedbackPath(threadId, answerId), {
        method: "PUT",
        headers: await headersFor("user-1"),
        body: JSON.stringify({ rating: "down", comment: "too short" }),
      });

    const unsent = await send();
    expect(unsent.status).toBe(200);
    expect(await unsent.json()).toMatchObject({ announced: false, feedback: { rating: "down" } });
    expect(await rowsOf(answerId)).toMatchObject([{ rating: "down", comment: "too short" }]);

    reachable = true;
    expect(await (await send()).json()).toMatchObject({ announced: true });
    expect(attempts).toHaveLength(2);
    expect(attempts[1]!.id).toBe(attempts[0]!.id);
    // An answer stored without a recorded model (as older turns were) is announced with model null.
    expect(attempts[1]!.data).toMatchObject({ runId: `run-${messageId}`, model: null });
  });

  it("goes with its thread: deleting the thread deletes the feedback", async () => {
    const { threadId, answerId } = await answeredTurn();
    await put(threadId, answerId, { rating: "up" });

    const deleted = await app.request(`/api/threads/${threadId}`, {
      method: "DELETE",
      headers: await headersFor("user-1"),
    });

    expect(deleted.status).toBe(200);
    expect(await rowsOf(answerId)).toEqual([]);
    expect((await put(threadId, answerId, { rating: "up" })).status).toBe(404);
  });
});
