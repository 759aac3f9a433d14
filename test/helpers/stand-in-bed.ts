import type { InngestFunction } from "inngest";
import type pg from "pg";
import { afterAll, beforeAll, expect } from "vitest";
import { inngest } from "../../inngest.config.js";
import { chooseModel, type ModelChoice } from "../../src/agents/model.js";
import { readEnvironment } from "../../src/config.js";
import { createEventNotifier, type EventNotifier } from "../../src/stream/notifier.js";
import { createTestDatabase, type TestDatabase } from "./database.js";
import { within } from "./deadline.js";
import { type EngineStandIn, type StandInOptions, type StandInRun, startEngineStandIn } from "./engine-stand-in.js";
import { headersFor, serveToStandIn } from "./http.js";
import { type ModelServer, startModelServer } from "./model-server.js";

export type StandInBed = {
  db: TestDatabase;
  model: ModelServer;
  engine: EngineStandIn;
  events: EventNotifier;
  /** Where the app listens. */
  url: string;
  /**
   * useChat sending `text` as message `messageId` of chat `threadId` (POST /api/ui/chat,
   * submit-message), as user-1 unless `userId`; `edits`: the message it edits.
   */
  send: (
    threadId: string,
    messageId: string,
    text: string,
    options?: { userId?: string; edits?: string },
  ) => Promise<Response>;
  /** The thread event rows run `runId` wrote, in order: each event and its data's status. */
  runRows: (runId: string) => Promise<{ event: string; status: string | null }[]>;
  /** The turn-cancelled run that handled run `run`'s cancellation, once it completed. */
  cancellationHandled: (run: StandInRun) => Promise<StandInRun>;
};

/**
 * The app as deployed, its functions run by the engine stand-in over the serve protocol: a test
 * file's own database, scripted model server (the model choice `functions` gets points at it),
 * engine stand-in, event notifier and listening app, created before its tests and closed after
 * them. `functions` builds the functions served, from the file's database and model choice.
 */
export function useStandInBed(
  functions: (deps: { db: pg.Pool; model: ModelChoice }) => InngestFunction.Any[],
  engineOptions: StandInOptions = {},
): StandInBed {
  const bed = {} as StandInBed;
  let app: Awaited<ReturnType<typeof serveToStandIn>> | undefined;
  beforeAll(async () => {
    bed.db = await createTestDatabase();
    bed.model = await startModelServer();
    bed.engine = await startEngineStandIn(engineOptions);
    // The serve handler's Inngest client is built with the app: it sends events and checkpoints to the stand-in.
    process.env.INNGEST_BASE_URL = bed.engine.url;
    const model = chooseModel(
      readEnvironment({ OPENAI_BASE_URL: bed.model.baseUrl, OPENAI_API_KEY: "test", MODEL: "test-model" }),
    );
    bed.events = createEventNotifier(bed.db.pool);
    app = await serveToStandIn(bed.db.pool, bed.engine, functions({ db: bed.db.pool, model }), {
      events: bed.events,
    });
    bed.url = app.url;
  });
  afterAll(async () => {
    await bed.engine?.close();
    await bed.events?.close();
    await app?.close();
    await bed.model?.close();
    await bed.db?.drop();
  });
  bed.send = async (threadId, messageId, text, { userId = "user-1", edits } = {}) =>
    fetch(`${bed.url}/api/ui/chat`, {
      method: "POST",
      headers: await headersFor(userId),
      body: JSON.stringify({
        id: threadId,
        trigger: "submit-message",
        messages: [{ id: messageId, role: "user", parts: [{ type: "text", text }] }],
        ...(edits === undefined ? {} : { messageId: edits }),
      }),
    });
  bed.runRows = async (runId) =>
    (
      await bed.db.pool.query<{ event: string; status: string | null }>(
        "SELECT event, data ->> 'status' AS status FROM thread_events WHERE run_id = $1 ORDER BY id",
        [runId],
      )
    ).rows;
  bed.cancellationHandled = async (run) => {
    const handler = await bed.engine.runFor(
      (r) => r.fnId === `${inngest.id}-turn-cancelled` && (r.event.data as { run_id?: string }).run_id === run.runId,
    );
    await within(handler.ended, "the cancellation's handler ends");
    expect(handler.status).toBe("completed");
    return handler;
  };
  return bed;
}
