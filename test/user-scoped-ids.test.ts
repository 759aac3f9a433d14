import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { chatMessageEventId } from "../src/api/send-message.js";
import { asUser, createTestApp } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

// Inngest drops an event whose id it has seen, and a run whose idempotency key it has seen, for 24
// hours, across the whole app (inngest.com/docs/guides/handling-idempotency). InngestTestEngine
// models neither, so these tests pin the ids the app hands Inngest (the functions' idempotency
// keys: turn-waits.test.ts): each holds the user.
const bed = useTestBed();

describe("event ids and idempotency keys are scoped by user", () => {
  it("the same message id sent by two users makes two distinct events, neither dropped as the other's duplicate", async () => {
    const { app, sent } = createTestApp(bed.db.pool);
    const messageId = randomUUID();
    for (const user of ["alice", "mallory"]) {
      expect(
        (await asUser(app, user).post("/api/chat", { messageId, threadId: randomUUID(), content: "same id" })).status,
      ).toBe(202);
    }
    expect(sent.map((event) => event.id)).toEqual([
      chatMessageEventId("alice", messageId),
      chatMessageEventId("mallory", messageId),
    ]);
    expect(new Set(sent.map((event) => event.id)).size).toBe(2);
    // The same user re-sending is still one event id (Inngest drops the duplicate).
    expect(chatMessageEventId("alice", messageId)).toBe(chatMessageEventId("alice", messageId));
    // Bounded whatever the user id holds.
    expect(chatMessageEventId("x".repeat(200), messageId).length).toBeLessThan(80);
  });
});
