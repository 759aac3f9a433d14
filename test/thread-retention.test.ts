import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createThreadRetention, RETENTION_BATCH } from "../src/functions/thread-retention.js";
import { ASSISTANT_NAME } from "../src/agents/assistant.js";
import { resultId } from "../src/history/ids.js";
import { beginTurn, storeAnswer } from "../src/history/store.js";
import { execute } from "./helpers/engine.js";
import { seedThread, storeAnsweredTurn } from "./helpers/seed.js";
import { tableRowCounts } from "./helpers/table-rows.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

const DAY_MS = 86_400_000;
const cronEvent = { name: "inngest/scheduled.timer", data: { cron: "TZ=UTC 17 * * * *" } };

const daysAgo = (days: number) => new Date(Date.now() - days * DAY_MS);
const setActivity = (threadIds: string[], at: Date) =>
  bed.db.pool.query("UPDATE threads SET last_activity_at = $2 WHERE id = ANY($1)", [threadIds, at]);
const existing = async (threadIds: string[]) =>
  (
    await bed.db.pool.query<{ id: string }>("SELECT id FROM threads WHERE id = ANY($1) ORDER BY id", [threadIds])
  ).rows.map((r) => r.id);

describe("thread retention (RETENTION_DAYS)", () => {
  it("deletes exactly the threads inactive for longer than N days, with all their rows, in bounded batches, and announces each; a re-run deletes nothing more", async () => {
    const retention = createThreadRetention({ db: bed.db.pool, retentionDays: 30 });
    const seed = async (count: number, userId: string) => {
      const ids: string[] = [];
      for (let i = 0; i < count; i += 1) ids.push((await seedThread(bed.db.pool, { turns: 1, userId })).threadId);
      return ids;
    };
    const kept = await seed(3, "keeps");
    // A thread that was quiet for a year and got a message today: the message moves its activity on.
    await setActivity([kept[0]!], daysAgo(400));
    await beginTurn(bed.db.pool, {
      threadId: kept[0]!,
      userId: "keeps",
      message: { id: randomUUID(), text: "back again" },
      turn: { runId: `run-${randomUUID()}`, kind: "chat" },
    });
    const baseline = await tableRowCounts(bed.db.pool);
    // More expired threads than one batch holds, so the run needs a second batch.
    const expired = await bed.db.pool
      .query<{ id: string }>(
        `INSERT INTO threads (id, user_id) SELECT gen_random_uuid(), 'old-' || (i % 3) FROM generate_series(1, $1::int) i RETURNING id`,
        [RETENTION_BATCH + 5],
      )
      .then((r) => r.rows.map((row) => row.id));
    const expiredWithMessages = await seed(2, "old-with-messages");
    await setActivity([...expired, ...expiredWithMessages], daysAgo(31));
    const borderline = await seed(1, "recent");
    await setActivity(borderline, daysAgo(29));

    const run = await execute(retention, cronEvent);

    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ status: "done", deleted: expired.length + expiredWithMessages.length });
    expect(run.stepIds.filter((id) => id.startsWith("retention.delete-batch-"))).toEqual([
      "retention.delete-batch-0",
      "retention.delete-batch-1",
    ]);
    expect(await existing([...expired, ...expiredWithMessages])).toEqual([]);
    expect(await existing([...kept, ...borderline])).toEqual([...kept, ...borderline].sort());
    const announced = run.sentEvents.filter((e) => e.name === "thread/deleted");
    expect(announced.map((e) => e.data.threadId).sort()).toEqual([...expired, ...expiredWithMessages].sort());
    expect(announced.every((e) => e.data.reason === "retention" && e.id === `thread-deleted-${e.data.threadId}`)).toBe(
      true,
    );

    // Every row of the deleted threads is gone (messages, turns); the borderline thread's remain.
    const after = await tableRowCounts(bed.db.pool);
    const borderlineRows = await tableRowCountsOf(borderline[0]!);
    expect(after.messages).toBe(baseline.messages! + borderlineRows.messages);
    expect(after.turns).toBe(baseline.turns! + borderlineRows.turns);
    expect(after.threads).toBe(baseline.threads! + 1);

    const again = await execute(retention, cronEvent);
    expect(again.result).toMatchObject({ status: "done", deleted: 0 });
    expect(again.sentEvents).toEqual([]);
    expect(await tableRowCounts(bed.db.pool)).toEqual(after);
  });

  it("keeps an inactive thread while a turn runs on it (a regenerate of an old answer stores no message until it answers)", async () => {
    const retention = createThreadRetention({ db: bed.db.pool, retentionDays: 30 });
    const userId = "regenerates";
    const threadId = randomUUID();
    const { messageId } = await storeAnsweredTurn(bed.db.pool, { threadId, userId, question: "Q?", answer: "A." });
    await setActivity([threadId], daysAgo(31));
    const runId = `regen-${randomUUID()}`;
    const regen = await beginTurn(bed.db.pool, {
      threadId,
      userId,
      message: { id: messageId, text: "Q?" },
      turn: { runId, kind: "regenerate" },
    });
    expect(regen.status).toBe("running");

    const run = await execute(retention, cronEvent);

    expect(run.result).toMatchObject({ status: "done", deleted: 0 });
    expect(await existing([threadId])).toEqual([threadId]);
    // Its answer is stored, and moves the thread's activity on: the next run keeps it too.
    await storeAnswer(bed.db.pool, {
      threadId,
      userId,
      runId,
      messageId,
      messageSeq: regen.messageSeq,
      variant: regen.variant,
      detachLaterTurns: true,
      results: [
        {
          id: resultId(messageId, regen.variant, 0),
          agentName: ASSISTANT_NAME,
          content: { output: [{ type: "text", role: "assistant", content: "A, again." }], toolCalls: [] },
        },
      ],
    });
    expect((await execute(retention, cronEvent)).result).toMatchObject({ deleted: 0 });
    expect(await existing([threadId])).toEqual([threadId]);
  });

  it("deletes nothing when RETENTION_DAYS is unset", async () => {
    const { threadId } = await seedThread(bed.db.pool, { turns: 1, userId: "forever" });
    await setActivity([threadId], daysAgo(10_000));
    const run = await execute(createThreadRetention({ db: bed.db.pool }), cronEvent);
    expect(run.result).toEqual({ status: "disabled", deleted: 0, tombstonesPruned: 0 });
    expect(await existing([threadId])).toEqual([threadId]);
  });
});

async function tableRowCountsOf(threadId: string) {
  const { rows } = await bed.db.pool.query<{ messages: number; turns: number }>(
    "SELECT (SELECT count(*)::int FROM messages WHERE thread_id = $1) AS messages, (SELECT count(*)::int FROM turns WHERE thread_id = $1) AS turns",
    [threadId],
  );
  return rows[0]!;
}
