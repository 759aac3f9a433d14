import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { cancelTurn, failTurn } from "../src/history/turns.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, conversation, scriptedModel, turnsOf } from "./helpers/fixtures.js";
import { useTestBed } from "./helpers/test-bed.js";

/**
 * A run's answer that comes after its turn was ended by another hand. Inngest cancels a run between
 * steps, so a step executing when the cancellation lands runs to its end; a turn presumed lost is
 * recorded as failed while its run may still be alive. Either way the run's history.append-results
 * may come after the turn was recorded cancelled or failed, and its stream ended. As for a stopped
 * turn (test/stop.test.ts), the late answer stores nothing and the turn stays as recorded: the
 * thread shows no answer the log never announced, and the log ends once.
 */
const bed = useTestBed();
let chatTurn: ReturnType<typeof createChatTurn>;
beforeAll(() => {
  chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
});

const endingsOf = async (runId: string) =>
  (
    await bed.db.pool.query<{ event: string; data: Record<string, unknown> }>(
      "SELECT event, data FROM thread_events WHERE run_id = $1 AND event IN ('stream.ended', 'turn.cancelled', 'turn.failed', 'turn.completed') ORDER BY id",
      [runId],
    )
  ).rows;

const answersTo = async (messageId: string) =>
  (await bed.db.pool.query("SELECT id FROM messages WHERE answers = $1", [messageId])).rows;

describe("an answer stored after the turn ended by another hand", () => {
  it.each([
    {
      status: "cancelled",
      end: (runId: string) => cancelTurn(bed.db.pool, runId),
      error: "The run was cancelled.",
    },
    {
      status: "failed",
      end: (runId: string) => failTurn(bed.db.pool, runId, "presumed lost"),
      error: "presumed lost",
    },
  ])(
    "a $status turn stays $status: nothing is stored, the log ends once, the run reports it",
    async ({ status, end, error }) => {
      const { threadId } = await conversation(chatTurn, bed.model, [["My name is Ada.", "Hello, Ada."]]);
      const event = chatEvent({ threadId, content: "Tell me a long story." });
      const messageId = event.data.messageId;
      const runId = `run-${randomUUID()}`;
      bed.model.script({ text: "Once upon a time. The end." });

      const run = await execute(chatTurn, event, {
        runId,
        beforeStep: async (id) => {
          if (id === "history.append-results") await end(runId);
        },
      });

      // Soft: a failure shows every way the turn went wrong at once.
      expect(run.error).toBeUndefined();
      expect
        .soft(await turnsOf(bed.db.pool, messageId))
        .toEqual([{ run_id: runId, kind: "chat", variant: 1, status, error }]);
      expect.soft(await answersTo(messageId)).toEqual([]);
      expect.soft(await endingsOf(runId)).toEqual([
        { event: `turn.${status}`, data: { runId, messageId, error } },
        { event: "stream.ended", data: { scope: "network", status, runId, messageId } },
      ]);
      expect.soft(run.result).toMatchObject({ status });
      expect
        .soft(run.sentEvents)
        .toEqual([
          expect.objectContaining({ id: `turn-finished-${runId}`, data: { threadId, runId, messageId, status } }),
        ]);
    },
  );
});
