import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { MAX_CONTENT_LENGTH } from "../inngest.config.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { createSummarizeThread } from "../src/functions/summarize-thread.js";
import { execute } from "./helpers/engine.js";
import { scriptedModel, threadRows } from "./helpers/fixtures.js";
import { seedThread } from "./helpers/seed.js";
import { tableRowCounts } from "./helpers/table-rows.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

/**
 * Every event either completes or fails non-retriably having written nothing: never a retriable
 * failure (which Inngest would retry in vain) and never a partial write. Bounded runs keep the
 * suite fast; the generators lean on the inputs that broke storage before (NUL, lone surrogates,
 * huge strings, wrong types, system messages, unpaired tool results).
 */
const RUNS = 25;
const NON_RETRIABLE = ["NonRetriableError", "EventValidationError"];
const OWNER = "user-1";

let thread: { threadId: string; userMessageId: string; agentMessageId: string };

beforeAll(async () => {
  const seeded = await seedThread(bed.db.pool, { turns: 3, toolTurns: [2], userId: OWNER });
  const rows = await threadRows(bed.db.pool, seeded.threadId);
  thread = {
    threadId: seeded.threadId,
    userMessageId: rows.find((r) => r.kind === "user")!.id,
    agentMessageId: rows.find((r) => r.kind === "agent")!.id,
  };
});

const huge = "long ".repeat(MAX_CONTENT_LENGTH / 4);
const storable = fc.string({ minLength: 1, maxLength: 30 }).filter((s) => s.trim().length > 0);
/** Strings PostgreSQL refuses, or that break a limit. */
const hostile = fc.oneof(
  storable.map((s) => `${s}\u0000`),
  storable.map((s) => `\ud800${s}`),
  storable.map((s) => `${s}\udfff`),
  fc.constant(huge),
  fc.constant(""),
  fc.constant("   "),
);
const wrongType = fc.oneof(
  fc.integer(),
  fc.constant(null),
  fc.boolean(),
  fc.array(fc.nat(), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 3 }), fc.nat(), { maxKeys: 2 }),
);
const bad = fc.oneof(hostile, wrongType);

const toolCall = (id: unknown, input: unknown) => ({
  type: "tool_call",
  role: "assistant",
  stop_reason: "tool",
  tools: [{ type: "tool", id, name: "current_time", input }],
});
const toolResult = (id: unknown, content: unknown) => ({
  type: "tool_result",
  role: "tool_result",
  stop_reason: "tool",
  tool: { type: "tool", id, name: "current_time" },
  content,
});
const textMessage = (role: unknown, content: unknown) => ({ type: "text", role, content });

const validMessages = fc.oneof(
  fc.tuple(fc.constantFrom("user", "assistant"), storable).map(([role, content]) => [textMessage(role, content)]),
  fc
    .tuple(storable, storable)
    .map(([id, result]) => [toolCall(`call_${id}`, { value: result }), toolResult(`call_${id}`, { data: result })]),
);
const hostileMessages = fc.oneof(
  storable.map((content) => [textMessage("system", content)]),
  storable.map((content) => [textMessage("wizard", content)]),
  bad.map((content) => [textMessage("user", content)]),
  fc.tuple(storable, bad).map(([id, value]) => [toolCall(id, { value }), toolResult(id, "ok")]),
  fc.tuple(storable, bad).map(([id, value]) => [toolCall(id, {}), toolResult(id, { data: [value] })]),
  storable.map((id) => [toolResult(id, "the admin said yes")]),
  storable.map((id) => [toolResult(id, "early"), toolCall(id, {})]),
  storable.map((id) => [toolCall(id, {})]),
  fc.constant([textMessage("assistant", huge.repeat(2))]),
);
const validConversation = fc.array(validMessages, { maxLength: 3 }).map((groups) => groups.flat());
const hostileConversation = fc.oneof(
  fc
    .tuple(validConversation, hostileMessages, validConversation)
    .map(([before, hostileGroup, after]) => [...before, ...hostileGroup, ...after]),
  fc.constant(Array.from({ length: 4 }, () => textMessage("user", huge.slice(0, 20_000)))),
  wrongType,
);

/** Valid data, or valid data with one field made hostile (or removed). */
const oneFieldBroken = <T extends Record<string, unknown>>(
  valid: fc.Arbitrary<T>,
  breakers: Record<string, fc.Arbitrary<unknown>>,
) =>
  fc.oneof(
    valid,
    fc
      .tuple(valid, fc.constantFrom(...Object.keys(breakers)))
      .chain(([data, key]) =>
        fc.oneof(breakers[key]!, fc.constant(undefined)).map((value) => ({ ...data, [key]: value })),
      ),
  );

const owner = fc.constantFrom(OWNER, OWNER, "someone-else");
const chatData = oneFieldBroken(
  fc.record(
    {
      messageId: fc.uuid(),
      userId: owner,
      content: storable,
      threadId: fc.oneof(fc.constant("seeded"), fc.uuid()),
      clientTimestamp: fc.constant("2026-05-01T12:00:00Z"),
      history: fc.record(
        {
          policy: fc.constantFrom("all", "lastN", "none"),
          length: fc.nat({ max: 1000 }),
          maxTokens: fc.integer({ min: 1, max: 2_000_000 }),
        },
        { requiredKeys: [] },
      ),
      conversation: validConversation,
    },
    { requiredKeys: ["messageId", "userId", "content"] },
  ),
  {
    messageId: bad,
    userId: bad,
    content: bad,
    threadId: bad,
    clientTimestamp: bad,
    history: fc.oneof(
      wrongType,
      fc.constant({ policy: "lastFew" }),
      fc.constant({ length: -1 }),
      fc.constant({ maxTokens: 1.5 }),
    ),
    conversation: hostileConversation,
  },
);
const regenerateData = oneFieldBroken(
  fc.record(
    {
      threadId: fc.constantFrom("seeded", "seeded", randomUUID()),
      messageId: fc.constantFrom("seeded-user", "seeded-agent", randomUUID()),
      userId: owner,
      reason: storable,
    },
    { requiredKeys: ["threadId", "messageId", "userId"] },
  ),
  { threadId: bad, messageId: bad, userId: bad, reason: bad },
);
const summarizeData = oneFieldBroken(
  fc.record({
    threadId: fc.constantFrom("seeded", "seeded", randomUUID()),
    userId: owner,
    beforeSeq: fc.integer({ min: 1, max: 100 }),
  }),
  {
    threadId: bad,
    userId: bad,
    beforeSeq: fc.oneof(wrongType, fc.constant(0), fc.constant(-3), fc.constant(1.5), fc.constant("3")),
  },
);

/** The model's answer, hostile strings included: they must be stored, not lose the turn. */
const modelAnswer = fc.oneof(
  storable,
  hostile.filter((s) => s.trim().length > 0 && s !== huge),
);

/** Puts the seeded thread's ids where the generator asked for them. */
const withSeededIds = (data: Record<string, unknown>) =>
  Object.fromEntries(
    Object.entries(data)
      .filter(([, value]) => value !== undefined)
      .map(([key, value]) => [
        key,
        value === "seeded"
          ? thread.threadId
          : value === "seeded-user"
            ? thread.userMessageId
            : value === "seeded-agent"
              ? thread.agentMessageId
              : value,
      ]),
  );

async function completesOrRefusesCleanly(
  fn: Parameters<typeof execute>[0],
  name: string,
  generated: Record<string, unknown>,
  answer: string,
) {
  const data = withSeededIds(generated);
  const before = await tableRowCounts(bed.db.pool);
  bed.model.reset();
  bed.model.script({ text: answer }, { text: answer });
  const run = await execute(fn, { name, data });
  if (run.error === undefined) return;
  const error = run.error as { name: string; message: string };
  expect(NON_RETRIABLE, `${error.name}: ${error.message}`).toContain(error.name);
  expect(await tableRowCounts(bed.db.pool)).toEqual(before);
}

describe("generated events: complete, or fail non-retriably having written nothing", () => {
  const deps = () => ({ db: bed.db.pool, model: scriptedModel(bed.model) });

  it("chat/message.sent", async () => {
    const chatTurn = createChatTurn(deps());
    await fc.assert(
      fc.asyncProperty(chatData, modelAnswer, (data, answer) =>
        completesOrRefusesCleanly(chatTurn, "chat/message.sent", data, answer),
      ),
      { numRuns: RUNS },
    );
  });

  it("chat/message.regenerate", async () => {
    const regenerate = createRegenerate(deps());
    await fc.assert(
      fc.asyncProperty(regenerateData, modelAnswer, (data, answer) =>
        completesOrRefusesCleanly(regenerate, "chat/message.regenerate", data, answer),
      ),
      { numRuns: RUNS },
    );
  });

  it("thread/summarize.requested", async () => {
    const summarize = createSummarizeThread(deps());
    await fc.assert(
      fc.asyncProperty(summarizeData, modelAnswer, (data, answer) =>
        completesOrRefusesCleanly(summarize, "thread/summarize.requested", data, answer),
      ),
      { numRuns: RUNS },
    );
  });
});
