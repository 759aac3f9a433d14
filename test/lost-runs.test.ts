import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createReconcileTurns } from "../src/functions/reconcile-turns.js";
import { beginTurn } from "../src/history/store.js";
import { askEngineAboutRun, hashedSigningKey, type InngestEngine } from "../src/platform/inngest-engine.js";
import { execute } from "./helpers/engine.js";
import { scriptedModel, threadWithRunningTurn, turnsOf, chatEvent } from "./helpers/fixtures.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

const SIGNING_KEY = "signkey-prod-0123456789abcdef0123456789abcdef";

/**
 * A stand-in for Inngest's REST API on loopback: GET /v1/runs/:runId answers what `runs` says of
 * the run (a status, or an HTTP error), 404 for a run it was not told about, and records every request.
 */
type StandInAnswer = { status: string; ended_at?: string } | { http: number; body: string };
const runs = new Map<string, StandInAnswer>();
const asked: { path: string; authorization: string | undefined }[] = [];
let api: Server;
let engine: InngestEngine;

beforeAll(async () => {
  api = createServer((request, response) => {
    asked.push({ path: request.url ?? "", authorization: request.headers.authorization });
    const runId = decodeURIComponent(/^\/v1\/runs\/([^/]+)$/.exec(request.url ?? "")?.[1] ?? "");
    const answer = runs.get(runId) ?? { http: 404, body: '{"error":"run not found"}' };
    if ("http" in answer)
      return void response.writeHead(answer.http, { "content-type": "application/json" }).end(answer.body);
    response
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify({ data: { run_id: runId, ...answer } }));
  });
  await new Promise<void>((resolve) => api.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
  engine = { kind: "self-hosted", eventUrl: url, apiUrl: url, signingKey: SIGNING_KEY };
});
afterAll(() => new Promise<void>((resolve) => api.close(() => resolve())));

const DEADLINE_MINUTES = 10;

/** One reconciliation (the cron's run) as if `minutes` had passed since now: the clock is read inside its first step. */
const reconcileAfter = (minutes: number) =>
  execute(
    createReconcileTurns({
      db: bed.db.pool,
      engine,
      deadlineMinutes: DEADLINE_MINUTES,
      clock: () => new Date(Date.now() + minutes * 60_000),
    }),
    {
      name: "inngest/scheduled.timer",
      data: { cron: "* * * * *" },
    },
  );

const chatTurn = () => createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });

describe("runs lost by the engine (reconcile-turns, every two minutes)", () => {
  it("a turn whose run the engine does not know is recorded failed within minutes; the waiting turn is released and the next message is answered", async () => {
    const { threadId, event, attempt } = await threadWithRunningTurn(
      bed.db.pool,
      chatTurn(),
      bed.model,
      "What is my name?",
    );

    // Half a minute in: too early to ask (a live run is always known by then anyway).
    const early = await reconcileAfter(0.5);
    expect(early.result).toMatchObject({ checked: 0, lost: 0 });
    expect(asked.filter((r) => r.path.includes(attempt.runId))).toEqual([]);

    // Two minutes in — well within the deadline — the engine answers 404 for the run: it is lost.
    const run = await reconcileAfter(2);
    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ lost: 1, runIds: [attempt.runId] });
    const [turn] = await turnsOf(bed.db.pool, event.data.messageId);
    expect(turn).toMatchObject({ run_id: attempt.runId, status: "failed" });
    expect(turn!.error).toMatch(
      /^Inngest no longer knows this turn's run: it was lost .* Regenerate the message to answer it\.$/,
    );
    // Asked with the SDK's hashed signing key, never the key itself.
    expect(asked.filter((r) => r.path === `/v1/runs/${attempt.runId}`)).toEqual([
      { path: `/v1/runs/${attempt.runId}`, authorization: `Bearer ${hashedSigningKey(SIGNING_KEY)}` },
    ]);
    expect(hashedSigningKey(SIGNING_KEY)).toMatch(/^signkey-prod-[0-9a-f]{64}$/);
    expect(hashedSigningKey(SIGNING_KEY)).not.toContain("0123456789abcdef");
    // A turn waiting for it is released at once, under the id the run's own finish would have had.
    expect(run.sentEvents).toEqual([
      {
        name: "threadline/turn.finished",
        id: `turn-finished-${attempt.runId}`,
        data: { threadId, runId: attempt.runId, messageId: event.data.messageId, status: "failed" },
      },
    ]);

    // Reconciling again changes nothing.
    expect((await reconcileAfter(3)).result).toMatchObject({ lost: 0 });

    // The thread is free: the next message is answered, with no wait for the lost turn.
    bed.model.script({ text: "You are Ada." });
    const next = await execute(chatTurn(), chatEvent({ threadId, content: "Are you there?" }));
    expect(next.error).toBeUndefined();
    expect(next.result).toMatchObject({ status: "completed", answer: "You are Ada." });
    expect(next.stepIds.filter((id) => id.startsWith("history.wait-for-turn"))).toEqual([]);
  });

  it("a run the engine reports ended whose end was never recorded is recorded failed, naming the engine's status", async () => {
    const { event, attempt } = await threadWithRunningTurn(bed.db.pool, chatTurn(), bed.model, "And my age?");
    runs.set(attempt.runId, { status: "Cancelled", ended_at: new Date(Date.now() - 5 * 60_000).toISOString() });

    const run = await reconcileAfter(2);
    expect(run.result).toMatchObject({ runIds: [attempt.runId] });
    expect((await turnsOf(bed.db.pool, event.data.messageId))[0]!.error).toBe(
      "Inngest reports this turn's run as Cancelled, but its end was never recorded. Regenerate the message to answer it.",
    );
  });

  it("when the engine cannot tell (it still lists the run as running), the thread's current turn is presumed lost at the deadline, not before; a turn queued behind it is not", async () => {
    const { threadId, event, attempt } = await threadWithRunningTurn(
      bed.db.pool,
      chatTurn(),
      bed.model,
      "Where do I live?",
    );
    runs.set(attempt.runId, { status: "Running" });
    const queued = { messageId: randomUUID(), runId: `run-${randomUUID()}` };
    await beginTurn(bed.db.pool, {
      threadId,
      userId: "user-1",
      message: { id: queued.messageId, text: "Hello?" },
      turn: { runId: queued.runId, kind: "chat" },
    });
    runs.set(queued.runId, { status: "Running" });

    const before = await reconcileAfter(DEADLINE_MINUTES - 1);
    expect(before.result).toMatchObject({ lost: 0 });
    expect(await turnsOf(bed.db.pool, event.data.messageId)).toMatchObject([{ status: "running" }]);

    const after = await reconcileAfter(DEADLINE_MINUTES + 1);
    expect(after.result).toMatchObject({ runIds: [attempt.runId] });
    expect((await turnsOf(bed.db.pool, event.data.messageId))[0]!.error).toBe(
      `No finish was reported for this turn within LOST_RUN_DEADLINE_MINUTES (${DEADLINE_MINUTES} minutes) of its thread's turn coming: its run is presumed lost. Regenerate the message to answer it.`,
    );
    expect(await turnsOf(bed.db.pool, queued.messageId)).toMatchObject([{ status: "running" }]);
  });
});

describe("asking the engine about a run (engine facts in src/platform/inngest-engine.ts)", () => {
  it("reads Inngest Cloud's 404 and the open-source server's 500 'Unable to load function run' as unknown; other faults leave the answer to the deadline", async () => {
    const ask = (runId: string, answer: StandInAnswer) => {
      runs.set(runId, answer);
      return askEngineAboutRun(engine, runId);
    };
    expect(await askEngineAboutRun(engine, "never-told")).toEqual({ verdict: "unknown" });
    expect(await ask("oss-missing", { http: 500, body: '{"error":"Unable to load function run: 01J"}' })).toEqual({
      verdict: "unknown",
    });
    expect(await ask("completed", { status: "Completed" })).toEqual({ verdict: "ended", status: "Completed" });
    // Ended moments ago: its end is still being recorded (a cancellation's handler runs just after it).
    expect(
      await ask("just-cancelled", { status: "Cancelled", ended_at: new Date(Date.now() - 10_000).toISOString() }),
    ).toEqual({ verdict: "running" });
    expect(
      await ask("long-cancelled", { status: "Cancelled", ended_at: new Date(Date.now() - 120_000).toISOString() }),
    ).toEqual({ verdict: "ended", status: "Cancelled" });
    expect(await ask("running", { status: "Running" })).toEqual({ verdict: "running" });
    expect(await ask("faulty", { http: 502, body: "bad gateway" })).toMatchObject({
      verdict: "unanswered",
      reason: "HTTP 502: bad gateway",
    });
    expect(await askEngineAboutRun({ ...engine, apiUrl: "http://127.0.0.1:9" }, "any")).toMatchObject({
      verdict: "unanswered",
    });
  });
});
