import type {
  PartCompletedEvent,
  PartCreatedEvent,
  RunCompletedEvent,
  RunStartedEvent,
  TextDeltaEvent,
  ToolCallArgumentsDeltaEvent,
  ToolCallOutputDeltaEvent,
} from "@inngest/agent-kit";
import { describe, expect, expectTypeOf, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { beginTurn } from "../src/history/store.js";
import { type ThreadLogData, threadLogEvent } from "../src/history/thread-log.js";
import { updateThread } from "../src/history/threads.js";
import { storeModelTitle } from "../src/history/titles.js";
import { cancelTurn, failTurn, stopRunningTurn } from "../src/history/turns.js";
import { deltaWriter } from "../src/stream/delta-writer.js";
import { execute, StepFault } from "./helpers/engine.js";
import { chatEvent, scriptedModel } from "./helpers/fixtures.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

describe("the thread log's vocabulary", () => {
  it("admits every chunk AgentKit publishes into the log, as AgentKit types it", () => {
    expectTypeOf<RunStartedEvent["data"]>().toExtend<ThreadLogData<"run.started">>();
    expectTypeOf<RunCompletedEvent["data"]>().toExtend<ThreadLogData<"run.completed">>();
    expectTypeOf<PartCreatedEvent["data"]>().toExtend<ThreadLogData<"part.created">>();
    expectTypeOf<PartCompletedEvent["data"]>().toExtend<ThreadLogData<"part.completed">>();
    expectTypeOf<TextDeltaEvent["data"]>().toExtend<ThreadLogData<"text.delta">>();
    expectTypeOf<ToolCallArgumentsDeltaEvent["data"]>().toExtend<ThreadLogData<"tool_call.arguments.delta">>();
    expectTypeOf<ToolCallOutputDeltaEvent["data"]>().toExtend<ThreadLogData<"tool_call.output.delta">>();
  });

  it("describes exactly what the writers write: every row parses, and parsing drops nothing", async () => {
    const db = bed.db.pool;
    const model = scriptedModel(bed.model);
    const chatTurn = createChatTurn({ db, model, eventLog: true });

    // A turn with AgentKit's chunks, answered; a title by the model, then the user's, then none.
    bed.model.script({ text: "Hello there" });
    const answered = chatEvent({ content: "Hi" });
    expect((await execute(chatTurn, answered)).error).toBeUndefined();
    const threadId = answered.data.messageId;
    await storeModelTitle(db, threadId, "Greetings");
    await updateThread(db, { threadId, userId: "user-1", title: "Mine" });
    await updateThread(db, { threadId, userId: "user-1", title: null });

    // An attempt that failed (turn.retrying), then recorded failed; another one cancelled.
    for (const end of [(runId: string) => failTurn(db, runId, "The model failed."), cancelTurn.bind(null, db)]) {
      bed.model.script({ status: 500 });
      const failed = await execute(chatTurn, chatEvent({ content: "Fails", threadId }));
      expect(failed.error).toBeDefined();
      await end(failed.runId);
    }

    // An inference step's streamed text, then the user's stop.
    const stopped = crypto.randomUUID();
    await beginTurn(db, {
      threadId: stopped,
      userId: "user-1",
      message: { id: stopped, text: "Go on" },
      turn: { runId: `run-${stopped}`, kind: "chat" },
    });
    const writer = deltaWriter(
      db,
      { threadId: stopped, runId: `run-${stopped}`, stepId: "assistant", attempt: 0 },
      () => {
        throw new Error("a delta was not written");
      },
    );
    writer.push("Once upon");
    await writer.finish();
    await stopRunningTurn(db, { threadId: stopped, userId: "user-1", agentName: "assistant" });

    // A message sent with busy reject, refused by its run's first statement: a turn runs.
    const running = crypto.randomUUID();
    await beginTurn(db, {
      threadId,
      userId: "user-1",
      message: { id: running, text: "Busy" },
      turn: { runId: `run-${running}`, kind: "chat" },
    });
    const refused = chatEvent({ content: "Refused", threadId });
    expect((await execute(chatTurn, { ...refused, data: { ...refused.data, busy: "reject" } })).error).toBeDefined();

    // A message whose run failed before it began a turn (its first step never reached the
    // database): its onFailure logs the failure for the message.
    const unbegun = chatEvent({ content: "Lost", threadId });
    const lost = await execute(chatTurn, unbegun, {
      beforeStep: async (id) => {
        if (id === "history.append-user-message") throw new StepFault("connect ECONNREFUSED");
      },
    });
    expect(lost.error).toBeDefined();
    await failTurn(db, lost.runId, "connect ECONNREFUSED", { ...unbegun.data, threadId });

    // A message whose run was cancelled while queued: its cancellation is logged for the message.
    const queued = chatEvent({ content: "Cancelled", threadId });
    await cancelTurn(db, `run-${queued.data.messageId}`, { ...queued.data, threadId });

    const { rows } = await db.query<{ event: string; data: Record<string, unknown> }>(
      "SELECT event, data FROM thread_events ORDER BY thread_id, id",
    );
    const unparsed = rows.flatMap((row) => {
      const parsed = threadLogEvent.safeParse(row);
      return parsed.success ? (expect(parsed.data).toEqual(row), []) : [{ row, issues: parsed.error.issues }];
    });
    expect(unparsed).toEqual([]);
    expect(new Set(rows.map((row) => row.event))).toEqual(
      new Set([
        "run.started",
        "part.created",
        "text.delta",
        "part.completed",
        "run.completed",
        "stream.ended",
        "title.changed",
        "turn.retrying",
        "turn.failed",
        "turn.cancelled",
        "turn.stopped",
        "message.refused",
        "message.failed",
        "message.cancelled",
      ]),
    );
  });
});
