import { createHash } from "node:crypto";
import type { Environment } from "../config.js";
import { choosesDevServer } from "./inngest-serve.js";

/**
 * The Inngest server this deployment talks to, as the SDK resolves it from the same variables:
 * the dev server (INNGEST_DEV), a self-hosted `inngest start` (INNGEST_BASE_URL, or the event and
 * API base URLs) or Inngest Cloud. Readiness probes its event API (where chat events go), the
 * lost-run reconciliation asks its REST API about runs, and the 503 for an unsent event names it.
 */
export type InngestEngine = {
  kind: "dev" | "self-hosted" | "cloud";
  /** Where events are sent (inngest.send). */
  eventUrl: string;
  /** Inngest's REST API (GET /v1/runs/:runId). */
  apiUrl: string;
  /** The app's signing key (signkey-…), which authenticates REST API calls; none for the dev server. */
  signingKey?: string | undefined;
};

const DEV_SERVER_URL = "http://localhost:8288";
const CLOUD_EVENT_URL = "https://inn.gs";
const CLOUD_API_URL = "https://api.inngest.com";

const trimmed = (url: string) => url.replace(/\/+$/, "");

export function inngestEngine(env: Environment): InngestEngine {
  if (choosesDevServer(env)) {
    // INNGEST_DEV may be the dev server's URL; INNGEST_BASE_URL wins, as in the SDK.
    const devUrl =
      env.INNGEST_DEV !== undefined && /^https?:\/\//.test(env.INNGEST_DEV) ? env.INNGEST_DEV : DEV_SERVER_URL;
    const base = trimmed(env.INNGEST_BASE_URL ?? devUrl);
    return {
      kind: "dev",
      eventUrl: trimmed(env.INNGEST_EVENT_API_BASE_URL ?? base),
      apiUrl: trimmed(env.INNGEST_API_BASE_URL ?? base),
    };
  }
  const selfHosted =
    env.INNGEST_BASE_URL !== undefined ||
    env.INNGEST_EVENT_API_BASE_URL !== undefined ||
    env.INNGEST_API_BASE_URL !== undefined;
  return {
    kind: selfHosted ? "self-hosted" : "cloud",
    eventUrl: trimmed(env.INNGEST_EVENT_API_BASE_URL ?? env.INNGEST_BASE_URL ?? CLOUD_EVENT_URL),
    apiUrl: trimmed(env.INNGEST_API_BASE_URL ?? env.INNGEST_BASE_URL ?? CLOUD_API_URL),
    signingKey: env.INNGEST_SIGNING_KEY,
  };
}

/** The local dev server at its default address: what tests and a bare createApp talk to. */
export const devServerEngine = (): InngestEngine => ({ kind: "dev", eventUrl: DEV_SERVER_URL, apiUrl: DEV_SERVER_URL });

/** What the operator should check when an event could not be sent: the engine this deployment is configured for. */
export function engineAdvice(engine: InngestEngine): string {
  switch (engine.kind) {
    case "dev":
      return `the Inngest dev server is running at ${engine.eventUrl} (npm run dev starts it; or npx inngest-cli@latest dev)`;
    case "self-hosted":
      return `the self-hosted Inngest server at ${engine.eventUrl} is up and reachable from the app, and INNGEST_EVENT_KEY is one of its event keys (inngest start --event-key)`;
    case "cloud":
      return "Inngest Cloud is reachable from the app and INNGEST_EVENT_KEY is an event key of this environment (Inngest Cloud: Manage > Event Keys)";
  }
}

/**
 * The Authorization the SDK's own API client sends: the signing key's prefix and the SHA-256 of
 * its hex secret, so the key itself never travels.
 */
export function hashedSigningKey(signingKey: string): string {
  const prefix = /^signkey-\w+-/.exec(signingKey)?.[0] ?? "";
  return `${prefix}${createHash("sha256")
    .update(Buffer.from(signingKey.slice(prefix.length), "hex"))
    .digest("hex")}`;
}

/**
 * What the engine says of a run:
 * - `unknown`: it does not know the run (it was lost);
 * - `ended`: it finished (completed, failed or cancelled) over ENDED_GRACE_MS ago — if our turn is still running, its end was never recorded;
 * - `running`: queued or running (the engine may still list a run it lost on a restart as running);
 * - `unanswered`: the API could not be asked or gave no usable answer (the presumed-lost deadline decides).
 *
 * Engine facts (inngest/inngest pkg/api/apiv1/runs.go, cqrs.FunctionRun, enums.RunStatus):
 * GET /v1/runs/:runId answers the run's JSON with `status` "Running", "Completed", "Failed" or
 * "Cancelled" and `ended_at` (Inngest Cloud wraps it in `data`); a run the server cannot load is a 404 on Inngest
 * Cloud and a 500 "Unable to load function run" on the open-source server (dev and `inngest
 * start`), which has no separate not-found answer; a run id that is not a ULID is a 400.
 */
export type RunVerdict =
  | { verdict: "unknown" }
  | { verdict: "ended"; status: string }
  | { verdict: "running" }
  | { verdict: "unanswered"; reason: string };

const ENDED = new Set(["completed", "failed", "cancelled"]);

/**
 * A run that ended less than this long ago is not judged yet: its end is being recorded (the
 * cancellation function records a cancelled turn as cancelled, moments after the run ends).
 */
const ENDED_GRACE_MS = 60_000;

export async function askEngineAboutRun(
  engine: InngestEngine,
  runId: string,
  { now = new Date(), timeoutMs = 5_000 }: { now?: Date; timeoutMs?: number } = {},
): Promise<RunVerdict> {
  const headers: Record<string, string> = engine.signingKey
    ? { authorization: `Bearer ${hashedSigningKey(engine.signingKey)}` }
    : {};
  let response: Response;
  try {
    response = await fetch(`${engine.apiUrl}/v1/runs/${encodeURIComponent(runId)}`, {
      headers,
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (error) {
    return { verdict: "unanswered", reason: error instanceof Error ? error.message : String(error) };
  }
  const text = await response.text().catch(() => "");
  if (response.status === 404 || (response.status === 500 && text.includes("Unable to load function run")))
    return { verdict: "unknown" };
  if (!response.ok) return { verdict: "unanswered", reason: `HTTP ${response.status}: ${text.slice(0, 200)}` };
  type Run = { status?: unknown; ended_at?: unknown };
  let body: Run & { data?: Run };
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    return { verdict: "unanswered", reason: "the answer was not JSON" };
  }
  const run = body.data ?? body;
  if (typeof run.status !== "string") return { verdict: "unanswered", reason: "the answer names no status" };
  if (!ENDED.has(run.status.toLowerCase())) return { verdict: "running" };
  const endedAt = typeof run.ended_at === "string" ? Date.parse(run.ended_at) : Number.NaN;
  return now.getTime() - endedAt < ENDED_GRACE_MS ? { verdict: "running" } : { verdict: "ended", status: run.status };
}

/**
 * Whether the engine answers at all: any HTTP answer from its event API counts (a refusal still
 * proves it is up); a refused connection or a timeout does not. At most one probe per
 * `intervalMs`, however many callers ask: a probe under way is shared, and its answer is reused
 * until the interval has passed.
 */
export function engineProbe(
  engine: Pick<InngestEngine, "eventUrl">,
  { intervalMs, timeoutMs = 2_000, now = Date.now }: { intervalMs: number; timeoutMs?: number; now?: () => number },
) {
  let last: { at: number; answer: Promise<EngineReachability> } | undefined;
  const probe = async (): Promise<EngineReachability> => {
    try {
      await fetch(engine.eventUrl, { method: "GET", signal: AbortSignal.timeout(timeoutMs) }).then((response) =>
        response.body?.cancel(),
      );
      return { reachable: true };
    } catch (error) {
      return {
        reachable: false,
        reason:
          error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error),
      };
    }
  };
  return {
    check(): Promise<EngineReachability> {
      const at = now();
      if (!last || at - last.at >= intervalMs) last = { at, answer: probe() };
      return last.answer;
    },
  };
}

export type EngineReachability = { reachable: true } | { reachable: false; reason: string };
export type EngineProbe = ReturnType<typeof engineProbe>;
