import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { memoriesDeletedResponse, memoryDeletedResponse, memoryListResponse } from "../src/api/memories.js";
import { ensureThread } from "../src/history/store.js";
import { rememberFromThread } from "../src/history/memories.js";
import { asUser, createTestApp, headersFor } from "./helpers/http.js";
import { rememberFact } from "./helpers/seed.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

const del = async (app: ReturnType<typeof createTestApp>["app"], userId: string, path: string) =>
  app.request(path, { method: "DELETE", headers: await headersFor(userId) });

describe("GET/DELETE /api/memories", () => {
  it("lists only the caller's memories, newest first, a page at a time", async () => {
    const { app } = createTestApp(bed.db.pool);
    const userId = `user-${randomUUID()}`;
    for (const text of ["Likes tea", "Works nights", "Speaks Portuguese"])
      await rememberFact(bed.db.pool, userId, text);
    await rememberFact(bed.db.pool, `other-${randomUUID()}`, "Someone else's secret");

    const first = memoryListResponse.parse(await (await asUser(app, userId).get("/api/memories?limit=2")).json());
    expect(first.memories.map((m) => m.text)).toEqual(["Speaks Portuguese", "Works nights"]);
    expect(first.memories[0]).toMatchObject({ source: "remembered", threadId: null });
    const rest = memoryListResponse.parse(
      await (await asUser(app, userId).get(`/api/memories?limit=2&after=${first.next}`)).json(),
    );
    expect(rest).toMatchObject({ memories: [{ text: "Likes tea" }], next: null });

    expect((await asUser(app, userId).get("/api/memories?after=nonsense")).status).toBe(400);
    for (const [method, path] of [
      ["GET", "/api/memories"],
      ["DELETE", "/api/memories"],
      ["DELETE", `/api/memories/${first.memories[0]!.id}`],
    ] as const) {
      expect((await app.request(path, { method })).status, `${method} ${path}`).toBe(401);
    }
    expect((await asUser(app, userId).get("/api/memories")).status).toBe(200);
    expect(
      memoryListResponse.parse(await (await asUser(app, userId).get("/api/memories")).json()).memories,
    ).toHaveLength(3);
  });

  it("refuses a cursor it never returned with 400, never a server error, however close it looks to one", async () => {
    const { app } = createTestApp(bed.db.pool);
    const userId = `user-${randomUUID()}`;
    await rememberFact(bed.db.pool, userId, "Likes tea");
    for (const forged of ["1.------------------------------------", `1.${"a".repeat(36)}`, `1.${"0".repeat(36)}`]) {
      const response = await asUser(app, userId).get(
        `/api/memories?after=${Buffer.from(forged).toString("base64url")}`,
      );
      expect(response.status, forged).toBe(400);
      expect(await response.json()).toMatchObject({ error: expect.stringContaining("after") });
    }
  });

  it("shows an extracted memory with the thread it came from", async () => {
    const { app } = createTestApp(bed.db.pool);
    const userId = `user-${randomUUID()}`;
    const threadId = randomUUID();
    await ensureThread(bed.db.pool, threadId, userId);
    await rememberFromThread(bed.db.pool, {
      userId,
      threadId,
      messageId: threadId,
      text: "Is planning a trip to Japan",
    });
    const list = memoryListResponse.parse(await (await asUser(app, userId).get("/api/memories")).json());
    expect(list.memories).toMatchObject([{ text: "Is planning a trip to Japan", source: "extracted", threadId }]);
  });

  it("erases one memory of the caller's, never another user's, and then all of them", async () => {
    const { app } = createTestApp(bed.db.pool);
    const userId = `user-${randomUUID()}`;
    const otherId = `other-${randomUUID()}`;
    const mine = await rememberFact(bed.db.pool, userId, "Drinks oat milk");
    await rememberFact(bed.db.pool, userId, "Runs on Sundays");
    const theirs = await rememberFact(bed.db.pool, otherId, "Drinks oat milk");
    if (mine.status !== "remembered" || theirs.status !== "remembered") throw new Error("not remembered");

    expect((await del(app, userId, `/api/memories/${theirs.id}`)).status).toBe(404);
    const one = await del(app, userId, `/api/memories/${mine.id}`);
    expect(one.status).toBe(200);
    expect(memoryDeletedResponse.parse(await one.json())).toEqual({ deleted: mine.id });
    expect((await del(app, userId, `/api/memories/${mine.id}`)).status).toBe(404);

    const all = await del(app, userId, "/api/memories");
    expect(memoriesDeletedResponse.parse(await all.json())).toEqual({ deleted: 1 });
    expect(memoryListResponse.parse(await (await asUser(app, userId).get("/api/memories")).json()).memories).toEqual(
      [],
    );
    expect(
      memoryListResponse.parse(await (await asUser(app, otherId).get("/api/memories")).json()).memories,
    ).toHaveLength(1);
  });
});
