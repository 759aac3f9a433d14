import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { inngest } from "../inngest.config.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createModelInference } from "../src/functions/model-inference.js";
import { CHAT_TURN_ID } from "../src/functions/turn-lifecycle.js";
import { seedThread } from "./helpers/seed.js";
import { useStandInBed } from "./helpers/stand-in-bed.js";

/**
 * A turn under the SDK's checkpoint mode (the executor names the function, so the SDK runs the
 * steps it can in one request and reports them to Inngest): the app served over HTTP to the
 * engine stand-in in that mode, INFERENCE=gateway (the turn invokes model-inference).
 */
// Checkpoint mode: the SDK reports the steps it runs in one request to the stand-in.
const bed = useStandInBed(({ db, model }) => [createChatTurn({ db, model }), createModelInference({ model })], {
  checkpoint: true,
});

describe("a chat turn in checkpoint mode", () => {
  it("stores the answer, with every step memoized in order and reported in one checkpoint before the model call", async () => {
    const { threadId, userId } = await seedThread(bed.db.pool, { turns: 2 });
    bed.model.script({ text: "Read the third one." });
    const messageId = randomUUID();
    const event = await bed.engine.send({
      name: "chat/message.sent",
      data: { threadId, userId, messageId, content: "What should I read next?" },
    });
    const run = await bed.engine.runFor((r) => r.event.id === event.id && r.fnId === `${inngest.id}-${CHAT_TURN_ID}`);
    await run.ended;

    expect(run.status).toBe("completed");
    const { rows } = await bed.db.pool.query(
      "SELECT content FROM messages WHERE thread_id = $1 AND answers = $2 AND kind = 'agent'",
      [threadId, messageId],
    );
    expect(rows.map((r) => r.content.output[0].content)).toEqual(["Read the third one."]);
    // Every step is memoized by the executor, in the order the turn took them.
    const ids = run.order.map((s) => s.id);
    const at = ["history.append-user-message", "assistant", "history.append-results"].map((id) => ids.indexOf(id));
    expect(at.every((i) => i >= 0)).toBe(true);
    expect(at).toEqual([...at].sort((a, b) => a - b));
    // The steps after the model call come back with the run's end, in the same request.
    expect(run.checkpoints).toBe(1);
  });
});
