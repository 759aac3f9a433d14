import { beforeAll, describe, expect, it } from "vitest";
import { MAX_PAGE_SIZE } from "../src/history/message-pages.js";
import * as sql from "../src/history/message-pages-sql.js";
import { seedBulkThread } from "./helpers/bulk-thread.js";
import { createTestApp, headersFor } from "./helpers/http.js";
import { storeAnsweredTurn } from "./helpers/seed.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

type Shown = { id: string; role: string; content: unknown; variantCount?: number; turn?: { status: string } | null };
type Page = { threadId: string; messages: Shown[]; hasMore: boolean; previous: string; next: string };

let app: ReturnType<typeof createTestApp>["app"];
beforeAll(() => {
  app = createTestApp(bed.db.pool).app;
});

async function readPage(threadId: string, query: Record<string, string>, userId = "user-1"): Promise<Page> {
  const response = await app.request(`/api/threads/${threadId}/messages?${new URLSearchParams(query)}`, {
    headers: await headersFor(userId),
  });
  expect(response.status, await response.clone().text()).toBe(200);
  return (await response.json()) as Page;
}

/** A turn appended through the real storage code, as a chat turn would: the question, then its answer. */
async function appendTurn(threadId: string, userId: string, text: string): Promise<string[]> {
  const { messageId, answerId } = await storeAnsweredTurn(bed.db.pool, {
    threadId,
    userId,
    question: text,
    answer: `answer to ${text}`,
  });
  return [messageId, answerId];
}

/** The thread's current path as stored, in thread order: what paging must return. */
async function storedPath(threadId: string): Promise<string[]> {
  const { rows } = await bed.db.pool.query<{ id: string }>(
    "SELECT id FROM messages WHERE thread_id = $1 AND on_path ORDER BY turn_seq, seq",
    [threadId],
  );
  return rows.map((row) => row.id);
}

describe("GET /api/threads/:threadId/messages, paged", () => {
  it("pages backwards through a 10,000-message thread while turns are appended, then forwards to what was appended: every message exactly once, in order", async () => {
    const { threadId, userId } = await seedBulkThread(bed.db.pool, { turns: 5_000 });
    const newest = await readPage(threadId, { limit: String(MAX_PAGE_SIZE) });
    expect(newest.messages).toHaveLength(MAX_PAGE_SIZE);
    expect(newest.hasMore).toBe(true);

    const appended: string[] = [];
    const older: Shown[][] = [newest.messages];
    let page = newest;
    while (page.hasMore) {
      appended.push(...(await appendTurn(threadId, userId, `appended while paging back ${appended.length / 2}`)));
      page = await readPage(threadId, { limit: String(MAX_PAGE_SIZE), before: page.previous });
      older.unshift(page.messages);
    }
    const newer: Shown[][] = [];
    page = newest;
    do {
      appended.push(...(await appendTurn(threadId, userId, `appended while paging forward ${appended.length / 2}`)));
      page = await readPage(threadId, { limit: "37", after: page.next });
      newer.push(page.messages);
    } while (page.hasMore);

    const seen = [...older, ...newer].flat().map((message) => message.id);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual(await storedPath(threadId));
    expect(seen).toHaveLength(10_000 + appended.length);
    expect(seen.slice(-appended.length)).toEqual(appended);
  });

  it("pages forwards from the oldest page to the newest while turns are appended, every message exactly once, in order", async () => {
    const { threadId, userId } = await seedBulkThread(bed.db.pool, { turns: 2_000 });
    let page = await readPage(threadId, { limit: "150" });
    while (page.hasMore) page = await readPage(threadId, { limit: "150", before: page.previous });
    const pages = [page.messages];
    do {
      await appendTurn(threadId, userId, "appended while paging forward");
      page = await readPage(threadId, { limit: "150", after: page.next });
      pages.push(page.messages);
    } while (page.hasMore);
    expect(pages.flat().map((message) => message.id)).toEqual(await storedPath(threadId));
  });

  it("shows each message as before: role, content, a user message's variant count and latest turn status", async () => {
    const { threadId } = await seedBulkThread(bed.db.pool, { turns: 3 });
    const page = await readPage(threadId, { limit: "2" });
    expect(page).toMatchObject({ threadId, hasMore: true });
    expect(page.messages).toMatchObject([
      {
        role: "user",
        agentName: "user",
        content: { text: "question 3" },
        variantCount: 1,
        turn: { status: "completed" },
      },
      { role: "assistant", agentName: "assistant", answers: page.messages[0]!.id, variant: 1 },
    ]);
    const first = await readPage(threadId, { before: page.previous });
    expect(first.messages.map((m) => m.content)).toMatchObject([
      { text: "question 1" },
      {},
      { text: "question 2" },
      {},
    ]);
    expect(first.hasMore).toBe(false);
    expect(await readPage(threadId, { after: page.next })).toMatchObject({
      messages: [],
      hasMore: false,
      next: page.next,
    });
  });

  it("defaults to the newest 50 messages", async () => {
    const { threadId } = await seedBulkThread(bed.db.pool, { turns: 40 });
    const page = await readPage(threadId, {});
    expect(page.messages).toHaveLength(50);
    expect(page.messages.at(-1)!.content).toMatchObject({ output: [{ content: "answer 40" }] });
    expect(page.messages[0]!.content).toEqual({ text: "question 16" });
  });

  it("refuses a bad limit or cursor with 400 naming it", async () => {
    const { threadId } = await seedBulkThread(bed.db.pool, { turns: 1 });
    const { next } = await readPage(threadId, {});
    const cases: [Record<string, string>, string, RegExp][] = [
      [{ limit: "0" }, "limit", /at least 1/],
      [{ limit: String(MAX_PAGE_SIZE + 1) }, "limit", /at most 200/],
      [{ limit: "ten" }, "limit", /whole number/],
      [{ before: "not a cursor" }, "before", /cursor/],
      [{ after: Buffer.from("1.x").toString("base64url") }, "after", /cursor/],
      [{ before: next, after: next }, "after", /not both/],
    ];
    for (const [query, field, message] of cases) {
      const response = await app.request(`/api/threads/${threadId}/messages?${new URLSearchParams(query)}`, {
        headers: await headersFor("user-1"),
      });
      expect(response.status, JSON.stringify(query)).toBe(400);
      const body = (await response.json()) as { error: string; issues: { field: string; message: string }[] };
      expect(body.issues).toContainEqual({ field, message: expect.stringMatching(message) });
    }
  });

  it("reads a page through messages_path_idx, stopping after the page: the same work on a 10,000-message thread as on a 100-message one", async () => {
    const long = await seedBulkThread(bed.db.pool, { turns: 5_000 });
    const short = await seedBulkThread(bed.db.pool, { turns: 50 });
    const limit = 51;
    const explain = async (statement: string, params: unknown[]) => {
      const { rows } = await bed.db.pool.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${statement}`, params);
      return rows[0]["QUERY PLAN"][0].Plan as PlanNode;
    };
    const reads = [
      [
        "newest, long",
        await explain(sql.selectPageBefore, [long.threadId, "9223372036854775807", "9223372036854775807", limit]),
      ],
      ["middle backwards, long", await explain(sql.selectPageBefore, [long.threadId, "5001", "5001", limit])],
      ["middle forwards, long", await explain(sql.selectPageAfter, [long.threadId, "5001", "5001", limit])],
      [
        "newest, short",
        await explain(sql.selectPageBefore, [short.threadId, "9223372036854775807", "9223372036854775807", limit]),
      ],
    ] as const;
    for (const [name, plan] of reads) {
      const nodes = flatten(plan);
      expect(
        nodes.filter((node) => node["Node Type"] === "Seq Scan"),
        name,
      ).toEqual([]);
      const pathScan = nodes.find((node) => node["Index Name"] === "messages_path_idx");
      expect(pathScan?.["Index Cond"], name).toMatch(/ROW\(turn_seq, seq\) [<>] ROW/);
      expect(pathScan?.["Actual Rows"], name).toBeLessThanOrEqual(limit);
    }
    const buffers = (plan: PlanNode) => plan["Shared Hit Blocks"] + plan["Shared Read Blocks"];
    expect(buffers(reads[0][1])).toBeLessThanOrEqual(buffers(reads[3][1]) + 10);
  });
});

type PlanNode = Record<string, unknown> & {
  "Shared Hit Blocks": number;
  "Shared Read Blocks": number;
  Plans?: PlanNode[];
};
const flatten = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(flatten)];
