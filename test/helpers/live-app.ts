import { randomUUID } from "node:crypto";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import type { InngestFunction } from "inngest";
import type pg from "pg";
import { chatMessageRegenerate, chatMessageSent } from "../../inngest.config.js";
import { createChatTurn } from "../../src/functions/chat-turn.js";
import { createRegenerate } from "../../src/functions/regenerate.js";
import { createEventNotifier } from "../../src/stream/notifier.js";
import { execute, executeFailureHandler, type Execution, type SentEvent } from "./engine.js";
import { scriptedModel } from "./fixtures.js";
import { createTestApp } from "./http.js";
import type { ModelServer } from "./model-server.js";

/** A turn the app started: its run id, its event and its execution (settled when the run ends). */
export type LiveRun = { runId: string; event: SentEvent; execution: Promise<Execution> };

export type LiveApp = {
  url: string;
  runs: LiveRun[];
  /** Cuts every open connection (a dropped network, a proxy's timeout): clients must reconnect. */
  dropConnections: () => void;
  close: () => Promise<void>;
};

/**
 * The app as `npm run dev` serves it, over real HTTP on a free port of 127.0.0.1, with AUTH=dev
 * (the X-Threadline-User header names the user) and INFERENCE=stream. A chat message or
 * regenerate it accepts runs at once, in the background, in this process: the real turn function
 * under the test engine, streaming the scripted model's answer into the event log. Each run gets
 * one attempt: one that fails has failed for good, and its onFailure handler runs as Inngest
 * would run it then.
 */
export async function startLiveApp(db: pg.Pool, model: ModelServer): Promise<LiveApp> {
  const deps = { db, model: scriptedModel(model), inference: "stream" as const };
  const functions: Record<string, InngestFunction.Like> = {
    [chatMessageSent.name]: createChatTurn(deps),
    [chatMessageRegenerate.name]: createRegenerate(deps),
  };
  const runs: LiveRun[] = [];
  const events = createEventNotifier(db);
  const { app } = createTestApp(db, {
    auth: { dev: true },
    events,
    sendEvent: async (event) => {
      const fn = functions[event.name];
      if (fn) {
        const run = { runId: `run-${randomUUID()}`, event } as LiveRun;
        run.execution = execute(fn, event, { runId: run.runId }).then(async (execution) => {
          if (execution.error !== undefined) {
            const { name, message } = execution.error as Error;
            await executeFailureHandler(fn, { runId: run.runId, event, error: { name, message } });
          }
          return execution;
        });
        runs.push(run);
      }
      return { ids: [`evt-${randomUUID()}`] };
    },
  });
  const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }) as Server;
  await new Promise((resolve) => server.once("listening", resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    runs,
    dropConnections: () => server.closeAllConnections(),
    close: async () => {
      // Closing the notifier ends the open event streams, so the server can close.
      await events.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await Promise.allSettled(runs.map((run) => run.execution));
    },
  };
}
