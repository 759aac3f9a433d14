import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { inngest } from "../inngest.config.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createModelInference } from "../src/functions/model-inference.js";
import { CHAT_TURN_ID } from "../src/functions/turn-lifecycle.js";
import { useStandInBed } from "./helpers/stand-in-bed.js";

/**
 * A turn whose final answer AgentKit rejects records that answer's usage in usage.<step id> before
 * it fails (src/functions/turn-runner.ts). When that step fails for good too, the run still fails
 * with the turn's own error, not the ledger's: that is what the user is shown.
 */
const bed = useStandInBed(({ db, model }) => [createChatTurn({ db, model }), createModelInference({ model })]);

describe("a rejected final answer whose usage step fails too", () => {
  it("fails the run with the turn's own error", async () => {
    await bed.db.pool.query(`
      CREATE FUNCTION test_ledger_down() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION 'ledger down'; END $$;
      CREATE TRIGGER test_ledger_down BEFORE INSERT ON usage_records FOR EACH ROW EXECUTE FUNCTION test_ledger_down();`);
    // Content that is no string: AgentKit's parser throws on it, after the inference succeeded.
    bed.model.script({
      status: 200,
      body: {
        id: "chatcmpl-rejected",
        object: "chat.completion",
        model: "test-model",
        choices: [{ index: 0, message: { role: "assistant", content: 42 }, finish_reason: "stop" }],
        usage: { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 },
      },
    });
    const event = await bed.engine.send({
      name: "chat/message.sent",
      data: { userId: `u-${randomUUID()}`, messageId: randomUUID(), content: "Answer in numbers." },
    });
    const run = await bed.engine.runFor((r) => r.event.id === event.id && r.fnId === `${inngest.id}-${CHAT_TURN_ID}`);
    await run.ended;

    expect(run.status).toBe("failed");
    expect(run.order.map((s) => s.id)).toContain("usage.assistant");
    // AgentKit's parser error, as a run whose usage step succeeded fails with.
    expect(run.output).toMatchObject({ name: "TypeError", message: expect.stringMatching(/content\.trim/) });
  });
});
