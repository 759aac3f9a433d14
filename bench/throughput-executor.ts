/**
 * The executor side of `npm run bench:throughput`, in a child process of its own so that its CPU
 * is not the app's: the engine stand-in (Inngest's part: it calls the app's serve endpoint, in
 * async or checkpoint mode), the scripted model server (the provider's part) and the clients that
 * send the messages (POST /api/chat, as a browser would) and wait for their turns to end.
 *
 * Spoken to over the fork's IPC channel: `start` answers the stand-in's URL and the model's;
 * `register` makes the stand-in sync the app; `drive` sends turns with a number in flight and
 * answers each turn's latency and outcome, with this process's CPU over the drive.
 */
import { randomUUID } from "node:crypto";
import { type EngineStandIn, type StandInRun, startEngineStandIn } from "../test/helpers/engine-stand-in.js";
import { type ModelServer, startModelServer } from "../test/helpers/model-server.js";

/** A thread the driver sends to, and the bearer token of its user. */
export type DriveThread = { threadId: string; token: string };

export type DriveRequest = {
  appUrl: string;
  /** The chat turn function's id as the stand-in names it (app id prefixed). */
  turnFunction: string;
  turns: number;
  inFlight: number;
  threads: DriveThread[];
  /**
   * spread: each turn takes an idle thread (the one idle longest), so no turn waits for another;
   * follow-ups: turn i goes to thread i mod threads, so a thread's turns queue behind each other.
   */
  assign: "spread" | "follow-ups";
};

export type TurnResult = {
  threadId: string;
  messageId: string;
  latencyMs: number;
  status: StandInRun["status"];
  output: unknown;
  /** Requests the stand-in made to the app for the turn and the model calls it invoked. */
  requests: number;
  checkpoints: number;
};

/** `ops`: the steps of the drive's first turn, in order, as `<id> [<kind>, <memoized bytes>]`. */
export type DriveResult = { turns: TurnResult[]; executorCpuMs: number; ops: string[] };

export type ToExecutor =
  | { type: "start"; checkpoint: boolean }
  | { type: "register"; appUrl: string }
  | ({ type: "drive" } & DriveRequest)
  | { type: "stop" };

export type FromExecutor =
  | { type: "started"; engineUrl: string; modelBaseUrl: string }
  | { type: "registered" }
  | ({ type: "driven" } & DriveResult)
  | { type: "failed"; message: string };

let engine: EngineStandIn | undefined;
let model: ModelServer | undefined;

const reply = (message: FromExecutor) => process.send!(message);

process.on("message", (message: ToExecutor) => {
  handle(message).catch((error: unknown) =>
    reply({ type: "failed", message: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
  );
});

async function handle(message: ToExecutor) {
  switch (message.type) {
    case "start":
      model = await startModelServer();
      engine = await startEngineStandIn({ checkpoint: message.checkpoint });
      reply({ type: "started", engineUrl: engine.url, modelBaseUrl: model.baseUrl });
      return;
    case "register":
      await engine!.registerApp(message.appUrl);
      reply({ type: "registered" });
      return;
    case "drive":
      reply({ type: "driven", ...(await drive(engine!, model!, message)) });
      return;
    case "stop":
      await engine?.close();
      await model?.close();
      process.exit(0);
  }
}

async function drive(engine: EngineStandIn, model: ModelServer, request: DriveRequest): Promise<DriveResult> {
  const runs = runIndex(engine, request.turnFunction);
  const idle = [...request.threads];
  let next = 0;
  const results: TurnResult[] = [];
  let ops: string[] = [];
  const cpuBefore = process.cpuUsage();

  const oneTurn = async (thread: DriveThread) => {
    const messageId = randomUUID();
    // One reply per turn: the turn makes one model call.
    model.script({ text: "An answer." });
    const started = performance.now();
    const response = await fetch(`${request.appUrl}/api/chat`, {
      method: "POST",
      headers: { authorization: `Bearer ${thread.token}`, "content-type": "application/json" },
      body: JSON.stringify({ threadId: thread.threadId, messageId, content: "What should I read next?" }),
    });
    if (response.status !== 202)
      throw new Error(`POST /api/chat answered ${response.status}: ${await response.text()}`);
    // The stand-in starts the run before it answers the app's event request, so the run exists now.
    const run = runs.of(messageId);
    await run.ended;
    const latencyMs = performance.now() - started;
    const invoked = engine.runs.filter((r) => r.invokedBy === run);
    if (ops.length === 0)
      ops = run.order.map(
        (o) => `${o.id} [${o.kind.replace(/^step\./, "")}, ${JSON.stringify(run.steps[o.hashedId] ?? null).length} B]`,
      );
    results.push({
      threadId: thread.threadId,
      messageId,
      latencyMs,
      status: run.status,
      output: run.output,
      requests: run.requests.length + invoked.reduce((n, r) => n + r.requests.length, 0),
      checkpoints: run.checkpoints + invoked.reduce((n, r) => n + r.checkpoints, 0),
    });
  };

  const worker = async () => {
    while (next < request.turns) {
      const i = next++;
      if (request.assign === "follow-ups") {
        await oneTurn(request.threads[i % request.threads.length]!);
        continue;
      }
      const thread = idle.shift();
      if (!thread) throw new Error("bench: no idle thread (fewer threads than turns in flight)");
      await oneTurn(thread);
      idle.push(thread);
    }
  };
  await Promise.all(Array.from({ length: request.inFlight }, worker));
  const cpu = process.cpuUsage(cpuBefore);
  return { turns: results, executorCpuMs: (cpu.user + cpu.system) / 1000, ops };
}

/** The stand-in's runs of the turn function by message id, indexed as they appear (the list only grows). */
function runIndex(engine: EngineStandIn, turnFunction: string) {
  const byMessage = new Map<string, StandInRun>();
  let seen = 0;
  return {
    of: (messageId: string) => {
      for (; seen < engine.runs.length; seen++) {
        const run = engine.runs[seen]!;
        if (run.fnId === turnFunction) byMessage.set(String(run.event.data.messageId), run);
      }
      const run = byMessage.get(messageId);
      if (!run) throw new Error(`bench: no run of ${turnFunction} for message ${messageId}`);
      return run;
    },
  };
}
