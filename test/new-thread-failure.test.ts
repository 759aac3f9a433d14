import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { inngest } from "../inngest.config.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createModelInference } from "../src/functions/model-inference.js";
import { CHAT_TURN_ID } from "../src/functions/turn-lifecycle.js";
import { within } from "./helpers/deadline.js";
import { uiChunks } from "./helpers/sse.js";
import { useStandInBed } from "./helpers/stand-in-bed.js";

/**
 * The app as deployed, its functions run by the engine stand-in over the serve protocol: a new
 * thread's first message, sent with useChat (POST /api/ui/chat), whose run's first step cannot
 * store it through all its retries. Inngest then runs onFailure with the failed run's event; the
 * open stream must end with the cause and [DONE], not heartbeats for ever. Sent again once the
 * database writes again, the message is answered.
 */
const OUTAGE = "could not extend file: No space left on device";
const bed = useStandInBed(({ db, model }) => [createChatTurn({ db, model }), createModelInference({ model })]);

describe("a new thread's first message whose first step fails through its retries, over the engine stand-in", () => {
  it("ends useChat's stream with the cause and [DONE]; sent again once storage works, it is answered", async () => {
    // No user message can be stored: every attempt of history.append-user-message fails.
    await bed.db.pool.query(`
      CREATE FUNCTION test_storage_down() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION '${OUTAGE}'; END $$;
      CREATE TRIGGER test_storage_down BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION test_storage_down();`);
    const threadId = randomUUID();
    const messageId = randomUUID();
    const response = await bed.send(threadId, messageId, "My name is Ada.");
    expect(response.status).toBe(200);

    expect(await within(uiChunks(response), "the UI message stream ends")).toEqual([
      { type: "error", errorText: OUTAGE },
      { type: "finish", finishReason: "error", messageMetadata: { status: "failed" } },
      "[DONE]",
    ]);
    const failed = bed.engine.runs.find((run) => run.fnId === `${inngest.id}-${CHAT_TURN_ID}`)!;
    expect(failed.status).toBe("failed");

    await bed.db.pool.query("DROP TRIGGER test_storage_down ON messages");
    bed.model.script({ text: "Hello, Ada." });
    const again = await bed.send(threadId, messageId, "My name is Ada.");
    expect(again.status).toBe(200);
    const answer = await within(uiChunks(again), "the second UI message stream ends");
    expect(answer.map((chunk) => (typeof chunk === "string" ? chunk : chunk.type))).not.toContain("error");
    expect(answer.at(-2)).toMatchObject({ type: "finish", messageMetadata: { status: "completed" } });
  });
});
