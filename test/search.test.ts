import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { ASSISTANT_NAME } from "../src/agents/assistant.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { searchResponse } from "../src/api/search.js";
import { resultId } from "../src/history/ids.js";
import { beginTurn, ensureThread, storeAnswer } from "../src/history/store.js";
import { execute } from "./helpers/engine.js";
import { conversation, scriptedModel } from "./helpers/fixtures.js";
import { asUser, createTestApp } from "./helpers/http.js";
import { seedThread } from "./helpers/seed.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

let app: ReturnType<typeof createTestApp>["app"];
beforeAll(() => {
  app = createTestApp(bed.db.pool).app;
});

type SearchBody = ReturnType<typeof searchResponse.parse>;

async function search(userId: string, query: Record<string, string>): Promise<SearchBody> {
  const response = await asUser(app, userId).get(`/api/search?${new URLSearchParams(query)}`);
  expect(response.status, await response.clone().text()).toBe(200);
  return searchResponse.parse(await response.json());
}

const newUser = () => `user-${randomUUID()}`;

/** A thread of one user whose turns say the given words (questions) and get the given answers. */
const threadSaying = (userId: string, turns: [question: string, answer: string][]) =>
  seedThread(bed.db.pool, {
    userId,
    turns: turns.length,
    texts: (turn) => ({ question: turns[turn - 1]![0], answer: turns[turn - 1]![1] }),
  });

describe("searching one's messages", () => {
  it("finds questions and answers across threads, best match first, with the matches marked in the snippet", async () => {
    const userId = newUser();
    await threadSaying(userId, [
      ["My garden and my neighbour's garden both need water.", "Water them at dawn."],
      ["Nothing to do with plants here.", "Indeed, a different topic."],
    ]);
    await threadSaying(userId, [
      [
        "Garden tips: a small garden, a shady garden, a garden by the sea.",
        "For a seaside garden choose hardy shrubs.",
      ],
    ]);

    const { results, hasMore, nextCursor } = await search(userId, { q: "gardens" });

    // The more often a message says it, the higher it ranks ("gardens" finds "garden": English stemming).
    expect(results.map((r) => [r.role, r.snippet])).toEqual([
      [
        "user",
        "<mark>Garden</mark> tips: a small <mark>garden</mark>, a shady <mark>garden</mark>, a <mark>garden</mark> by the sea.",
      ],
      ["user", "My <mark>garden</mark> and my neighbour&#39;s <mark>garden</mark> both need water."],
      ["assistant", "For a seaside <mark>garden</mark> choose hardy shrubs."],
    ]);
    expect(results[0]!.rank).toBeGreaterThan(results[1]!.rank);
    expect(results[1]!.rank).toBeGreaterThan(results[2]!.rank);
    expect(results.every((r) => r.onPath)).toBe(true);
    expect({ hasMore, nextCursor }).toEqual({ hasMore: false, nextCursor: null });
  });

  it("returns each hit's thread and message ids, so a client can open the thread at the message", async () => {
    const userId = newUser();
    const thread = await threadSaying(userId, [["Where is the lighthouse?", "On the northern cape."]]);
    const { rows } = await bed.db.pool.query<{ id: string; kind: string; created_at: Date }>(
      "SELECT id, kind, created_at FROM messages WHERE thread_id = $1 ORDER BY seq",
      [thread.threadId],
    );

    const { results } = await search(userId, { q: "lighthouse" });

    expect(results).toEqual([
      {
        threadId: thread.threadId,
        messageId: rows[0]!.id,
        role: "user",
        createdAt: rows[0]!.created_at.toISOString(),
        rank: expect.any(Number),
        snippet: "Where is the <mark>lighthouse</mark>?",
        onPath: true,
      },
    ]);
  });

  it("escapes the message's own markup, so a snippet can be shown as HTML", async () => {
    const userId = newUser();
    await threadSaying(userId, [[`<img src=x onerror="alert(1)"> & the walrus's <mark>tusk</mark>`, "ok"]]);

    const { results } = await search(userId, { q: "walrus" });

    expect(results.map((r) => r.snippet)).toEqual([
      "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; the <mark>walrus</mark>&#39;s &lt;mark&gt;tusk&lt;/mark&gt;",
    ]);
  });

  it("marks a match that touches markup (under the embedded server's C locale too, where the parser counts every non-ASCII character as a letter)", async () => {
    const userId = newUser();
    await threadSaying(userId, [["Say it in <b>bold</b>, a<b\u0001", "ok"]]);

    const { results } = await search(userId, { q: "bold" });

    expect(results.map((r) => r.snippet)).toEqual(["Say it in &lt;b&gt;<mark>bold</mark>&lt;/b&gt;, a&lt;b\uFFFD"]);
  });

  it("shows a passage around the match of a long message, not the whole message", async () => {
    const userId = newUser();
    const filler = (word: string) => Array.from({ length: 120 }, (_, i) => `${word}${i}`).join(" ");
    await threadSaying(userId, [[`${filler("before")} the zebra crossed ${filler("after")}`, "ok"]]);

    const [hit] = (await search(userId, { q: "zebra" })).results;

    expect(hit!.snippet).toContain("<mark>zebra</mark> crossed");
    expect(hit!.snippet.split(" ").length).toBeLessThanOrEqual(35);
    expect(hit!.snippet).not.toContain("after119");
  });

  it("searches the text of an answer given as text parts, never its tool calls or tool results", async () => {
    const userId = newUser();
    const threadId = randomUUID();
    const messageId = randomUUID();
    const runId = `search-${messageId}`;
    await ensureThread(bed.db.pool, threadId, userId);
    const start = await beginTurn(bed.db.pool, {
      threadId,
      userId,
      message: { id: messageId, text: "What time is it?" },
      turn: { runId, kind: "chat" },
    });
    const tool = { type: "tool" as const, id: "call_1", name: "current_time", input: { zone: "pelican" } };
    await storeAnswer(bed.db.pool, {
      threadId,
      userId,
      runId,
      messageId,
      messageSeq: start.messageSeq,
      variant: start.variant,
      detachLaterTurns: false,
      results: [
        {
          id: resultId(messageId, start.variant, 0),
          agentName: ASSISTANT_NAME,
          content: {
            output: [{ type: "tool_call", role: "assistant", stop_reason: "tool", tools: [tool] }],
            toolCalls: [
              {
                type: "tool_result",
                role: "tool_result",
                stop_reason: "tool",
                tool,
                content: { data: "flamingo o'clock" },
              },
            ],
          },
        },
        {
          id: resultId(messageId, start.variant, 1),
          agentName: ASSISTANT_NAME,
          content: {
            output: [
              {
                type: "text",
                role: "assistant",
                content: [
                  { type: "text", text: "It is noon " },
                  { type: "text", text: "in Lisbon." },
                ],
              },
            ],
            toolCalls: [],
          },
        },
      ],
    });

    expect((await search(userId, { q: "lisbon" })).results.map((r) => [r.messageId, r.snippet])).toEqual([
      [resultId(messageId, start.variant, 1), "It is noon \nin <mark>Lisbon</mark>."],
    ]);
    expect((await search(userId, { q: "pelican or flamingo or current_time" })).results).toEqual([]);
  });

  it("takes from any content the text the former query over the output took (threadline_message_text)", async () => {
    // The function's body before it became expressions only, as the reference.
    const former = `left(concat_ws(E'\\n', c ->> 'text',
      (SELECT string_agg(piece, E'\\n')
       FROM jsonb_path_query(c, '$.output[*] ? (@.type == "text").content') AS output(content),
            LATERAL (SELECT output.content #>> '{}' WHERE jsonb_typeof(output.content) = 'string'
                     UNION ALL
                     SELECT part ->> 'text' FROM jsonb_array_elements(CASE jsonb_typeof(output.content) WHEN 'array' THEN output.content ELSE '[]' END) AS part
                     WHERE part ->> 'type' = 'text') AS pieces(piece))), 100000)`;
    const contents = [
      { text: "What should I read next?" },
      { output: [{ type: "text", role: "assistant", content: "An answer." }], toolCalls: [] },
      {
        output: [
          { type: "text", content: "a" },
          { type: "tool_call", content: "not this" },
          {
            type: "text",
            content: [
              "bare",
              { type: "text", text: "b" },
              { type: "image", text: "no" },
              { type: "text" },
              { type: "text", text: "" },
              { type: "text", text: 5 },
            ],
          },
        ],
      },
      {
        output: [
          { type: "text", content: "" },
          { type: "text", content: "c" },
          { type: "text", content: null },
          { type: "text", content: { a: 1 } },
        ],
      },
      { output: { type: "text", content: "one object, not a list" } },
      { text: "both", output: [{ type: "text", content: "kinds" }] },
      { output: [] },
      { output: "x" },
      { output: [{ type: "text", content: [] }] },
      { output: [{ type: "text", content: 'quote " backslash \\ line\nbreak é' }] },
      {},
      { text: null },
      [{ output: [{ type: "text", content: "in a list" }] }],
      ["output"],
      "output",
      5,
      null,
      { text: "x".repeat(100_010) },
    ];
    const { rows } = await bed.db.pool.query(
      `SELECT threadline_message_text(c) AS now, ${former} AS former FROM jsonb_array_elements($1::jsonb) AS e(c)`,
      [JSON.stringify(contents)],
    );
    expect(rows).toHaveLength(contents.length);
    for (const row of rows) expect(row.now).toBe(row.former);
  });

  it("never shows another user's messages, however well they match", async () => {
    const mine = newUser();
    const theirs = newUser();
    const myThread = await threadSaying(mine, [["The marmot whistled.", "Marmots do that."]]);
    const theirThread = await threadSaying(theirs, [["Marmot marmot marmot marmot.", "Marmot marmot, marmot!"]]);

    const forMe = await search(mine, { q: "marmot", include: "all" });
    const forThem = await search(theirs, { q: "marmot" });

    expect(forMe.results.map((r) => r.threadId)).toEqual([myThread.threadId, myThread.threadId]);
    expect(forThem.results.map((r) => r.threadId)).toEqual([theirThread.threadId, theirThread.threadId]);
    expect((await search(newUser(), { q: "marmot" })).results).toEqual([]);
  });

  it("files every message under its thread's owner, whatever owner a writer names", async () => {
    const owner = newUser();
    const thread = await threadSaying(owner, [["Seen any narwhals?", "Not lately."]]);
    await bed.db.pool.query(
      `INSERT INTO messages (id, thread_id, seq, turn_seq, kind, agent_name, content, user_id)
       VALUES ($1, $2, 99, 99, 'user', 'user', '{"text": "narwhal tusks"}', 'mallory')`,
      [randomUUID(), thread.threadId],
    );

    expect((await search("mallory", { q: "narwhal" })).results).toEqual([]);
    expect((await search(owner, { q: "narwhal" })).results).toHaveLength(2);
  });

  it("leaves out an answer a regenerate replaced, unless asked for every message", async () => {
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
    const regenerate = createRegenerate({ db: bed.db.pool, model: scriptedModel(bed.model) });
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, [
      ["Tell me about volcanoes", "Volcanoes pour out basalt lava."],
    ]);
    bed.model.script({ text: "Volcanoes are mountains that erupt." });
    const run = await execute(regenerate, {
      name: "chat/message.regenerate",
      data: { userId: "user-1", threadId, messageId: messageIds[0]! },
    });
    expect(run.error).toBeUndefined();

    expect((await search("user-1", { q: "basalt" })).results).toEqual([]);
    expect((await search("user-1", { q: "basalt", include: "current" })).results).toEqual([]);
    const everything = await search("user-1", { q: "basalt", include: "all" });
    expect(everything.results.map((r) => [r.threadId, r.role, r.onPath, r.snippet])).toEqual([
      [threadId, "assistant", false, "Volcanoes pour out <mark>basalt</mark> lava."],
    ]);
    const current = await search("user-1", { q: "volcano" });
    expect(current.results.map((r) => [r.role, r.onPath, r.snippet])).toEqual(
      expect.arrayContaining([
        ["user", true, "Tell me about <mark>volcanoes</mark>"],
        ["assistant", true, "<mark>Volcanoes</mark> are mountains that erupt."],
      ]),
    );
    expect(current.results).toHaveLength(2);
  });

  it("never shows a deleted thread's messages", async () => {
    const userId = newUser();
    const kept = await threadSaying(userId, [["A quokka smiled at me.", "Quokkas often look like they smile."]]);
    const deleted = await threadSaying(userId, [["Another quokka photo.", "Lovely quokka."]]);
    expect((await search(userId, { q: "quokka" })).results).toHaveLength(4);

    await bed.db.pool.query("DELETE FROM threads WHERE id = $1", [deleted.threadId]);

    const { results } = await search(userId, { q: "quokka" });
    expect(results.map((r) => r.threadId)).toEqual([kept.threadId, kept.threadId]);
  });
});

describe("paging through the matches", () => {
  it("reads every match once, in rank order, while matching messages are added between pages", async () => {
    const userId = newUser();
    // 30 questions saying "lantern" 1 to 3 times: many equal ranks, so the order among them matters.
    const questions = Array.from({ length: 30 }, (_, i) => `${"lantern ".repeat(1 + (i % 3))}number ${i}`);
    await threadSaying(
      userId,
      questions.map((q) => [q, "noted"]),
    );
    const before = await search(userId, { q: "lantern", limit: "50" });
    expect(before.results).toHaveLength(30);

    const seen: SearchBody["results"] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: SearchBody = await search(userId, { q: "lantern", limit: "7", ...(cursor ? { cursor } : {}) });
      seen.push(...page.results);
      cursor = page.nextCursor;
      expect(page.hasMore).toBe(cursor !== null);
      pages += 1;
      // New matches, better and worse than what was read so far, arrive while the client pages.
      if (pages === 2) await threadSaying(userId, [["lantern lantern lantern lantern", "lantern"]]);
    } while (cursor);

    const ids = seen.map((r) => r.messageId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual(expect.arrayContaining(before.results.map((r) => r.messageId)));
    expect(seen.map((r) => r.rank)).toEqual([...seen.map((r) => r.rank)].sort((a, b) => b - a));
    // The pages read before the new messages arrived are the first pages of the order found up front.
    expect(ids.slice(0, 14)).toEqual(before.results.slice(0, 14).map((r) => r.messageId));
    expect(pages).toBeGreaterThanOrEqual(5);
  });
});

describe("what the query may be", () => {
  it("answers an empty list for no match and for a query of only stop words", async () => {
    const userId = newUser();
    await threadSaying(userId, [["The cat and the hat.", "Of the two, the hat."]]);

    expect((await search(userId, { q: "zeppelin" })).results).toEqual([]);
    expect(await search(userId, { q: "the and of" })).toEqual({
      query: "the and of",
      results: [],
      hasMore: false,
      nextCursor: null,
    });
    // websearch syntax: a phrase, OR and exclusion; unbalanced quotes are not an error.
    expect((await search(userId, { q: '"the hat"' })).results).toHaveLength(2);
    expect((await search(userId, { q: "cat -hat" })).results).toEqual([]);
    expect((await search(userId, { q: "zeppelin or cat" })).results).toHaveLength(1);
    expect((await search(userId, { q: '"cat and' })).results).toHaveLength(1);
  });

  it("refuses a missing, empty, overlong or NUL-carrying query, a foreign cursor and an unknown include, naming the field", async () => {
    const user = asUser(app, newUser());
    const refusals: [string, string][] = [
      ["", "q: q must be the text to search for"],
      ["q=%20%20", "q: q must not be empty"],
      [`q=${"a".repeat(201)}`, "q: q must be at most 200 characters"],
      ["q=a%00b", "q: must not contain the NUL character"],
      ["q=a&cursor=bm90LWEtY3Vyc29y", "cursor: cursor must be the nextCursor of an earlier page"],
      ["q=a&include=deleted", "include:"],
      ["q=a&limit=51", "limit: limit must be at most 50"],
    ];
    for (const [query, expected] of refusals) {
      const response = await user.get(`/api/search?${query}`);
      expect(response.status, query).toBe(400);
      expect(((await response.json()) as { error: string }).error, query).toContain(expected);
    }
  });

  it("answers 401 without a verified caller", async () => {
    expect((await app.request("/api/search?q=anything")).status).toBe(401);
  });
});
