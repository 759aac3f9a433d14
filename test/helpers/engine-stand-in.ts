import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A stand-in for the Inngest dev server on loopback, for tests that run the app as a process
 * (the real dev server cannot be installed here). It speaks the SDK's HTTP protocol:
 *
 * - `POST /fn/register`: the app registers its functions (the stand-in asks for it with
 *   `PUT <app>/api/inngest`, as `inngest dev -u <url>` does);
 * - `POST /e/:key`: events, deduplicated by id; each starts a run of every registered function it
 *   triggers, cancels runs whose `cancelOn` it matches and ends waits (`step.waitForEvent`) it matches;
 * - runs are executed by calling the function's step URL with the run's event and memoized steps,
 *   looping on 206 ops (async mode: `ctx.fn_id` is not sent, so the SDK does not checkpoint; with
 *   `checkpoint`, `ctx.fn_id` and `ctx.qi_id` are sent, so the SDK runs the steps it can in the same
 *   request and reports each one to `POST /v1/checkpoint/:runId/async`, memoized here like a 206's):
 *   step results are memoized, a failed step is retried up to the function's retries (then its
 *   error is memoized), `step.ai.infer` is performed here by calling the model URL, retried here
 *   without telling the SDK, its last non-2xx answer memoized as the AIGatewayError the real
 *   server hands over; `step.invoke` starts a run of the named function (event
 *   `inngest/function.invoked` with the invoke's data, its own retries) and memoizes what that run
 *   returned, or the error it failed with as it came, without retrying the invoke (docs/engine.md);
 *   waits and sleeps end here;
 *   a failed run starts its onFailure function (`inngest/function.failed`), a cancelled run sends
 *   `inngest/function.cancelled`;
 * - `hold` keeps a function's new runs queued (a backlog, as after an incident) until `release`;
 *   `cancel` cancels a run as an operator does (dashboard, REST API, bulk cancellation).
 *
 * - with `idempotency`, a function's idempotency key (its expression evaluated on the event) starts
 *   one run: an event with a key seen before starts none, whatever its id (Inngest keeps a key 24
 *   hours; the stand-in for its life). A rerun is no new event: it always starts.
 *
 * Modelled as BRIEF.md's engine facts say the real server behaves; NOT modelled: concurrency keys,
 * idempotency keys unless asked, debounce, batching, priority, cron and the retry backoff (retries
 * run at once).
 * Expressions (`if`, cancelOn) are understood in the forms Threadline uses: `==` / `!=` between
 * `event.…`/`async.…` paths and string literals, joined by `&&` / `||`.
 */
export type StandInOptions = {
  /** Function ids (app id prefixed, e.g. "threadline-chat-turn") that runs may start for; default: all registered. */
  functions?: (fnId: string) => boolean;
  /** Virtual time: how many real milliseconds one second of a wait's or a sleep's timeout lasts (default 1). */
  msPerSecond?: number;
  /** Lets the SDK checkpoint (AsyncCheckpointing, its default when the executor sends a function id); default: async mode. */
  checkpoint?: boolean;
  /** Models the functions' idempotency keys (default: not modelled, every event starts a run). */
  idempotency?: boolean;
};

type StandInEvent = { id: string; name: string; data: Record<string, unknown>; ts: number; v?: string };

/** A memoized step: its data, or the error it failed with for good. */
type MemoStep = { type: "data"; data: unknown } | { type: "error"; error: unknown };

export type StandInRun = {
  runId: string;
  fnId: string;
  event: StandInEvent;
  /** queued: held (`hold`), not started yet. */
  status: "queued" | "running" | "completed" | "failed" | "cancelled";
  /** The function's return value (completed) or its error (failed). */
  output?: unknown;
  /** Memoized steps by hashed id, and their user-facing ids and kinds (`step.run`, `step.ai.infer`, …) in the order they completed. */
  steps: Record<string, MemoStep>;
  order: { hashedId: string; id: string; kind: string }[];
  /** Every request made to the app for this run (attempt, step asked for). */
  requests: { attempt: number; stepId: string }[];
  /** How many checkpoint requests the SDK made for this run (checkpoint mode). */
  checkpoints: number;
  /** Every step.ai.infer the stand-in performed for this run or a run it invoked: the provider's status. */
  inferences: { url: string; status: number }[];
  /** The run whose step.invoke started this one. */
  invokedBy?: StandInRun;
  ended: Promise<void>;
};

type FnConfig = {
  id: string;
  triggers: { event?: string; expression?: string; cron?: string }[];
  steps: { step: { runtime: { url: string }; retries?: { attempts: number } } };
  cancel?: { event: string; if?: string }[];
  idempotency?: string;
};

type Op = {
  id: string;
  op: string;
  name?: string;
  displayName?: string;
  data?: unknown;
  error?: unknown;
  opts?: Record<string, unknown>;
  userland?: { id: string };
};

type Wait = { run: StandInRun; op: Op; resolve: (event: StandInEvent | null) => void };

export type EngineStandIn = {
  url: string;
  /** Every event received, in order (duplicates by id are dropped, as Inngest does). */
  events: StandInEvent[];
  runs: StandInRun[];
  /** Asks the app to register its functions (PUT <appUrl>), as the dev server's `-u` does. */
  registerApp: (appUrl: string) => Promise<void>;
  /** Sends an event as a client would. */
  send: (event: { name: string; data: Record<string, unknown>; id?: string }) => Promise<StandInEvent>;
  /**
   * Reruns a run as the dev server's "rerun" does: a new run of the same event, with the steps
   * completed before `fromStep` memoized (none without it), the later ones run again.
   */
  rerun: (run: StandInRun, fromStep?: string) => StandInRun;
  /** New runs of function `fnId` (app id prefixed) stay queued, none of their steps called, until `release(fnId)`. */
  hold: (fnId: string) => void;
  /** Starts the queued runs of `fnId`, and its later runs at once. */
  release: (fnId: string) => void;
  /**
   * Cancels a run as an operator does from the dashboard or the REST API: a queued run never
   * starts, a running one stops before its next step (a step executing runs to its end);
   * inngest/function.cancelled follows, with the run's event.
   */
  cancel: (run: StandInRun) => void;
  /** Resolves once a run matching `predicate` exists (runs start asynchronously after an event); rejects with what `predicate` throws. */
  runFor: (predicate: (run: StandInRun) => boolean, timeoutMs?: number) => Promise<StandInRun>;
  close: () => Promise<void>;
};

/** The server's text for a gateway request that got no answer (BRIEF.md, engine facts). */
const NO_ANSWER_BODY = JSON.stringify({ error: "Error making AI request" });

/** A failed step.ai.infer as the real server hands it to the SDK (BRIEF.md, engine facts). */
export function aiGatewayError(status: number | undefined, body: string) {
  const providerBody = body.trim() === "" || status === undefined ? NO_ANSWER_BODY : body;
  return {
    name: "AIGatewayError",
    message:
      status === undefined ? "Error making AI request" : `Error making AI request: unsuccessful status code: ${status}`,
    stack: providerBody,
    data: providerBody,
  };
}

export async function startEngineStandIn(options: StandInOptions = {}): Promise<EngineStandIn> {
  const msPerSecond = options.msPerSecond ?? 1;
  const functions = new Map<string, FnConfig>();
  const events: StandInEvent[] = [];
  const runs: StandInRun[] = [];
  const waits = new Set<Wait>();
  const timers = new Set<NodeJS.Timeout>();
  const runListeners = new Set<() => void>();
  const held = new Set<string>();
  /** A queued run's start, and the end of its `ended` should it be cancelled before starting. */
  const queued = new Map<StandInRun, { start: () => void; end: () => void }>();
  /** The idempotency keys that started a run, per function. */
  const idempotencyKeys = new Map<string, Set<string>>();
  let closed = false;

  const server: Server = createServer(async (req, res) => {
    const body = await readBody(req);
    const url = new URL(req.url ?? "/", "http://stand-in");
    if (req.method === "POST" && url.pathname === "/fn/register") {
      const registration = JSON.parse(body) as { functions: FnConfig[] };
      for (const fn of registration.functions) functions.set(fn.id, fn);
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ok: true, modified: true }));
      return;
    }
    const checkpointPath = /^\/v1\/checkpoint\/([^/]+)\/async$/.exec(url.pathname);
    if (req.method === "POST" && checkpointPath) {
      const run = runs.find((r) => r.runId === decodeURIComponent(checkpointPath[1]!));
      const { steps } = JSON.parse(body) as { steps: Op[] };
      const refused = run ? steps.find((op) => op.op !== "StepRun") : undefined;
      if (!run || refused) {
        res
          .writeHead(400, { "content-type": "application/json" })
          .end(JSON.stringify({ error: `stand-in: cannot checkpoint ${refused?.op ?? "an unknown run"}` }));
        return;
      }
      run.checkpoints += 1;
      for (const op of steps) memoize(run, op, { type: "data", data: op.data ?? null });
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
      return;
    }
    const eventPath = /^\/e\/([^/]+)$/.exec(url.pathname);
    if (req.method === "POST" && eventPath) {
      const payload = JSON.parse(body) as unknown;
      const accepted = (Array.isArray(payload) ? payload : [payload]).map((event) =>
        receive(event as Partial<StandInEvent>),
      );
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ ids: accepted.map((e) => e.id), status: 200 }));
      return;
    }
    res
      .writeHead(404, { "content-type": "application/json" })
      .end(JSON.stringify({ error: `stand-in: no route for ${req.method} ${url.pathname}` }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const standInUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  function receive(raw: Partial<StandInEvent>): StandInEvent {
    const event: StandInEvent = {
      id: raw.id ?? randomUUID(),
      name: raw.name ?? "",
      data: raw.data ?? {},
      ts: raw.ts ?? Date.now(),
      ...(raw.v ? { v: raw.v } : {}),
    };
    const duplicate = events.find((e) => e.id === event.id);
    if (duplicate) return duplicate;
    events.push(event);
    for (const wait of [...waits]) {
      const opts = wait.op.opts as { event?: string; if?: string } | undefined;
      if ((opts?.event ?? wait.op.name) !== event.name) continue;
      if (opts?.if && !evaluate(opts.if, { event: wait.run.event, async: event })) continue;
      waits.delete(wait);
      wait.resolve(event);
    }
    for (const run of runs) {
      if (run.status !== "running" && run.status !== "queued") continue;
      const cancels = functions.get(run.fnId)?.cancel ?? [];
      if (cancels.some((c) => c.event === event.name && (!c.if || evaluate(c.if, { event: run.event, async: event }))))
        cancel(run);
    }
    for (const fn of functions.values()) {
      if (options.functions && !options.functions(fn.id)) continue;
      const triggered = fn.triggers.some(
        (t) => t.event === event.name && (!t.expression || evaluate(t.expression, { event })),
      );
      if (triggered && !idempotent(fn, event)) start(fn, event, {}, []);
    }
    return event;
  }

  /** Whether `event` repeats an idempotency key of `fn` that started a run (then it starts none). */
  function idempotent(fn: FnConfig, event: StandInEvent): boolean {
    if (!options.idempotency || !fn.idempotency) return false;
    const key = keyOf(fn.idempotency, { event });
    const seen = idempotencyKeys.get(fn.id) ?? new Set<string>();
    idempotencyKeys.set(fn.id, seen);
    if (seen.has(key)) return true;
    seen.add(key);
    return false;
  }

  function cancel(run: StandInRun) {
    run.status = "cancelled";
    queued.get(run)?.end();
    queued.delete(run);
    for (const wait of [...waits]) {
      if (wait.run !== run) continue;
      waits.delete(wait);
      wait.resolve(null);
    }
    receive({
      name: "inngest/function.cancelled",
      data: { function_id: run.fnId, run_id: run.runId, event: run.event },
    });
  }

  function start(
    fn: FnConfig,
    event: StandInEvent,
    steps: Record<string, MemoStep>,
    order: StandInRun["order"],
    invokedBy?: StandInRun,
  ): StandInRun {
    let done!: () => void;
    const run: StandInRun = {
      runId: `01STANDIN${randomUUID().replaceAll("-", "").toUpperCase().slice(0, 17)}`,
      fnId: fn.id,
      event,
      status: held.has(fn.id) ? "queued" : "running",
      steps: { ...steps },
      order: [...order],
      requests: [],
      checkpoints: 0,
      inferences: [],
      ...(invokedBy && { invokedBy }),
      ended: new Promise<void>((resolve) => (done = resolve)),
    };
    const begin = () =>
      void execute(fn, run)
        .catch((error: unknown) => {
          run.status = "failed";
          run.output = { name: "StandInError", message: error instanceof Error ? error.message : String(error) };
        })
        .finally(done);
    runs.push(run);
    if (run.status === "queued") queued.set(run, { start: begin, end: done });
    for (const listener of runListeners) listener();
    if (run.status === "running") begin();
    return run;
  }

  async function execute(fn: FnConfig, run: StandInRun) {
    const maxAttempts = (fn.steps.step.retries?.attempts ?? 3) + 1;
    let attempt = 0;
    let stepId = "step";
    while (run.status === "running" && !closed) {
      run.requests.push({ attempt, stepId });
      const response = await call(fn, run, attempt, stepId);
      stepId = "step";
      if (run.status !== "running") return;
      if (response.status === 200) {
        finish(run, "completed", response.body);
        return;
      }
      if (response.status !== 206) {
        const retriable = response.noRetry !== "true";
        if (retriable && attempt + 1 < maxAttempts) {
          attempt += 1;
          continue;
        }
        finish(run, "failed", response.body);
        receive({
          name: "inngest/function.failed",
          data: { function_id: run.fnId, run_id: run.runId, error: response.body, event: run.event },
        });
        return;
      }
      const ops = response.body as Op[];
      let retry = false;
      for (const op of ops) {
        if (run.status !== "running") return;
        switch (op.op) {
          case "StepRun":
            memoize(run, op, { type: "data", data: op.data ?? null });
            break;
          case "RunComplete":
            finish(run, "completed", op.data);
            return;
          case "StepError":
            if (attempt + 1 < maxAttempts) retry = true;
            else memoize(run, op, { type: "error", error: op.error });
            break;
          case "StepFailed":
            memoize(run, op, { type: "error", error: op.error });
            break;
          case "StepPlanned":
            stepId = op.id;
            break;
          case "WaitForEvent":
            memoize(run, op, { type: "data", data: await waitFor(run, op) });
            break;
          case "Sleep":
            await delay(durationSeconds(String(op.name ?? op.opts?.duration ?? "0s")) * msPerSecond);
            memoize(run, op, { type: "data", data: null });
            break;
          case "AIGateway": {
            // The server retries a failed inference itself and tells the SDK only the last error.
            let answer = await infer(run, op);
            for (let more = attempt + 1; !answer.ok && more < maxAttempts && run.status === "running"; more += 1)
              answer = await infer(run, op);
            memoize(run, op, answer.ok ? { type: "data", data: answer.body } : { type: "error", error: answer.error });
            break;
          }
          case "InvokeFunction":
            memoize(run, op, await invoked(run, op));
            break;
          default:
            throw new Error(`stand-in: unsupported op ${op.op}`);
        }
      }
      attempt = retry ? attempt + 1 : 0;
    }
  }

  async function call(fn: FnConfig, run: StandInRun, attempt: number, stepId: string) {
    const url = new URL(fn.steps.step.runtime.url);
    url.searchParams.set("stepId", stepId);
    const stack = run.order.map((s) => s.hashedId);
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        event: run.event,
        events: [run.event],
        steps: run.steps,
        ctx: {
          run_id: run.runId,
          attempt,
          max_attempts: (fn.steps.step.retries?.attempts ?? 3) + 1,
          disable_immediate_execution: false,
          ...(options.checkpoint && { fn_id: fn.id, qi_id: `${run.runId}-${run.requests.length}` }),
          use_api: false,
          stack: { stack, current: stack.length },
        },
      }),
    });
    const text = await response.text();
    return {
      status: response.status,
      noRetry: response.headers.get("x-inngest-no-retry"),
      body: text ? (JSON.parse(text) as unknown) : null,
    };
  }

  function memoize(run: StandInRun, op: Op, step: MemoStep) {
    run.steps[op.id] = step;
    run.order.push({ hashedId: op.id, id: stepName(op), kind: String(op.opts?.type ?? op.op) });
  }

  function finish(run: StandInRun, status: "completed" | "failed", output: unknown) {
    run.status = status;
    run.output = output;
  }

  function waitFor(run: StandInRun, op: Op): Promise<StandInEvent | null> {
    return new Promise((resolve) => {
      const timer = setTimeout(
        () => {
          waits.delete(wait);
          resolve(null);
        },
        durationSeconds(String(op.opts?.timeout ?? "1h")) * msPerSecond,
      );
      timers.add(timer);
      const wait: Wait = {
        run,
        op,
        resolve: (event) => {
          clearTimeout(timer);
          resolve(event);
        },
      };
      waits.add(wait);
    });
  }

  /** A step.invoke: the invoked run's output, or its error as it came; never retried (docs/engine.md). */
  async function invoked(run: StandInRun, op: Op): Promise<MemoStep> {
    const opts = op.opts as { function_id: string; payload?: { data?: Record<string, unknown> } };
    const fn = functions.get(opts.function_id);
    if (!fn) return { type: "error", error: { name: "Error", message: `could not find function ${opts.function_id}` } };
    const event = {
      id: randomUUID(),
      name: "inngest/function.invoked",
      data: opts.payload?.data ?? {},
      ts: Date.now(),
    };
    const child = start(fn, event, {}, [], run);
    await child.ended;
    return child.status === "completed"
      ? { type: "data", data: child.output ?? null }
      : { type: "error", error: child.output };
  }

  async function infer(
    run: StandInRun,
    op: Op,
  ): Promise<{ ok: true; body: unknown } | { ok: false; error: ReturnType<typeof aiGatewayError> }> {
    const opts = op.opts as {
      url: string;
      headers?: Record<string, string>;
      auth_key?: string;
      format?: string;
      body: unknown;
    };
    const headers: Record<string, string> = { "content-type": "application/json", ...opts.headers };
    if (opts.format === "anthropic")
      Object.assign(headers, { "x-api-key": opts.auth_key ?? "", "anthropic-version": "2023-06-01" });
    else if (opts.format === "gemini") headers["x-goog-api-key"] = opts.auth_key ?? "";
    else headers.authorization = `Bearer ${opts.auth_key ?? ""}`;
    try {
      const response = await fetch(opts.url, { method: "POST", headers, body: JSON.stringify(opts.body) });
      const text = await response.text();
      performed(run, { url: opts.url, status: response.status });
      if (response.ok) return { ok: true, body: JSON.parse(text) as unknown };
      return { ok: false, error: aiGatewayError(response.status, text) };
    } catch {
      performed(run, { url: opts.url, status: 0 });
      return { ok: false, error: aiGatewayError(undefined, "") };
    }
  }

  /** An inference counts for its run and every run that invoked it (a turn's model calls). */
  function performed(run: StandInRun, inference: StandInRun["inferences"][number]) {
    for (let r: StandInRun | undefined = run; r; r = r.invokedBy) r.inferences.push(inference);
  }

  function delay(ms: number) {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      timers.add(timer);
    });
  }

  return {
    url: standInUrl,
    events,
    runs,
    registerApp: async (appUrl) => {
      const response = await fetch(appUrl, { method: "PUT" });
      if (!response.ok)
        throw new Error(`stand-in: registering ${appUrl} answered ${response.status}: ${await response.text()}`);
    },
    send: async (event) => receive(event),
    hold: (fnId) => held.add(fnId),
    release: (fnId) => {
      held.delete(fnId);
      for (const [run, { start: begin }] of [...queued]) {
        if (run.fnId !== fnId) continue;
        queued.delete(run);
        run.status = "running";
        begin();
      }
    },
    cancel: (run) => {
      if (run.status === "running" || run.status === "queued") cancel(run);
    },
    rerun: (original, fromStep) => {
      const fn = functions.get(original.fnId);
      if (!fn) throw new Error(`stand-in: function ${original.fnId} is not registered`);
      const at = fromStep === undefined ? 0 : original.order.findIndex((s) => s.id === fromStep);
      if (at < 0) throw new Error(`stand-in: run ${original.runId} has no step ${fromStep}`);
      const order = original.order.slice(0, at);
      const steps = Object.fromEntries(order.map((s) => [s.hashedId, original.steps[s.hashedId]!]));
      return start(fn, original.event, steps, order);
    },
    runFor: (predicate, timeoutMs = 15_000) =>
      new Promise((resolve, reject) => {
        const check = () => {
          // A predicate that throws fails the caller's runFor, not the stand-in's start of a run.
          let run: StandInRun | undefined;
          try {
            run = runs.find(predicate);
          } catch (error) {
            clearTimeout(timer);
            runListeners.delete(check);
            reject(error);
            return;
          }
          if (!run) return;
          clearTimeout(timer);
          runListeners.delete(check);
          resolve(run);
        };
        const timer = setTimeout(() => {
          runListeners.delete(check);
          reject(
            new Error(
              `stand-in: no matching run within ${timeoutMs} ms (runs: ${runs.map((r) => r.fnId).join(", ") || "none"})`,
            ),
          );
        }, timeoutMs);
        runListeners.add(check);
        check();
      }),
    close: async () => {
      closed = true;
      for (const { end } of queued.values()) end();
      for (const timer of timers) clearTimeout(timer);
      for (const wait of waits) wait.resolve(null);
      await Promise.allSettled(runs.map((run) => run.ended));
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A step's user-facing id. */
const stepName = (op: Op) => op.userland?.id ?? op.displayName ?? op.name ?? op.id;

const readBody = (req: IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });

/** Inngest's duration strings ("30s", "1m", "2h", "1d", also "1m30s") in seconds. */
function durationSeconds(text: string): number {
  const units: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3_600, d: 86_400, w: 604_800 };
  let total = 0;
  for (const [, amount, unit] of text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d|w)/g))
    total += Number(amount) * units[unit!]!;
  return total;
}

/** Evaluates the expression forms Threadline uses: comparisons of paths and literals, joined by && and ||. */
function evaluate(expression: string, scope: Record<string, unknown>): boolean {
  return expression.split("||").some((any) =>
    any.split("&&").every((all) => {
      const match = /^\s*(.+?)\s*(==|!=)\s*(.+?)\s*$/.exec(all);
      if (!match) throw new Error(`stand-in: unsupported expression ${expression}`);
      const [, left, operator, right] = match;
      const equal = operand(left!, scope) === operand(right!, scope);
      return operator === "==" ? equal : !equal;
    }),
  );
}

/**
 * Evaluates the key expression forms Threadline uses: `has(<path>) ? <key> : <key>`, a key being
 * paths and string literals joined by `+`.
 */
function keyOf(expression: string, scope: Record<string, unknown>): string {
  const question = topLevel(expression, "?");
  if (question >= 0) {
    const condition = /^\s*has\((.+)\)\s*$/.exec(expression.slice(0, question));
    const rest = expression.slice(question + 1);
    const colon = topLevel(rest, ":");
    if (!condition || colon < 0) throw new Error(`stand-in: unsupported key expression ${expression}`);
    const present = operand(condition[1]!.trim(), scope) !== undefined;
    return keyOf(present ? rest.slice(0, colon) : rest.slice(colon + 1), scope);
  }
  const terms: string[] = [];
  let from = 0;
  for (let plus = topLevel(expression, "+"); plus >= 0; plus = topLevel(expression, "+", from)) {
    terms.push(expression.slice(from, plus));
    from = plus + 1;
  }
  terms.push(expression.slice(from));
  return terms.map((term) => String(operand(term.trim(), scope))).join("");
}

/** The index of `char` in `text` at or after `from`, outside string literals; -1 when none. */
function topLevel(text: string, char: string, from = 0): number {
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote) {
      if (c === quote) quote = null;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === char && i >= from) return i;
  }
  return -1;
}

function operand(text: string, scope: Record<string, unknown>): unknown {
  const literal = /^(['"])(.*)\1$/.exec(text);
  if (literal) return literal[2];
  if (/^-?\d+(\.\d+)?$/.test(text)) return Number(text);
  return text
    .split(".")
    .reduce<unknown>(
      (value, key) => (value && typeof value === "object" ? (value as Record<string, unknown>)[key] : undefined),
      scope,
    );
}
