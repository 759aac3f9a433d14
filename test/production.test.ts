import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it, vi } from "vitest";
import { readEnvironment } from "../src/config.js";
import { createFunctions } from "../src/functions/index.js";
import type { InngestServing } from "../src/platform/inngest-serve.js";
import { startupRefusals } from "../src/platform/production.js";
import { startServer } from "../src/server.js";
import { countRows, scriptedModel } from "./helpers/fixtures.js";
import { createTestApp } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

/** A production environment with everything production mode requires. */
const production: Record<string, string> = {
  NODE_ENV: "production",
  INNGEST_SIGNING_KEY: "signkey-prod-0123456789abcdef",
  INNGEST_EVENT_KEY: "event-key",
  INNGEST_SERVE_ORIGIN: "https://chat.example.test",
  DATABASE_URL: "postgres://threadline@db.internal:5432/threadline",
  AUTH_JWKS_URL: "https://login.example.test/.well-known/jwks.json",
  AUTH_JWT_ISSUER: "https://login.example.test/",
  AUTH_JWT_AUDIENCE: "threadline-api",
};

const refusalsOf = (env: Record<string, string | undefined>) => startupRefusals(readEnvironment(env));

describe("production mode refuses to start", () => {
  it("starts with everything configured, or with API keys only when that is said explicitly", () => {
    expect(refusalsOf(production)).toEqual([]);
    expect(
      refusalsOf({
        ...production,
        AUTH_JWKS_URL: undefined,
        AUTH_JWT_ISSUER: undefined,
        AUTH_JWT_AUDIENCE: undefined,
        AUTH_API_KEYS_ONLY: "1",
      }),
    ).toEqual([]);
  });

  const missing: [setting: string, line: RegExp][] = [
    ["INNGEST_SIGNING_KEY", /^INNGEST_SIGNING_KEY is not set: production only runs requests signed by Inngest/],
    ["INNGEST_EVENT_KEY", /^INNGEST_EVENT_KEY is not set/],
    [
      "INNGEST_SERVE_ORIGIN",
      /^INNGEST_SERVE_ORIGIN is not set: production announces the URL Inngest calls from configuration, never from a request's Host; set it/,
    ],
    ["DATABASE_URL", /^DATABASE_URL is not set: production does not start an embedded database/],
    [
      "AUTH_JWKS_URL",
      /^No JWT verification is configured: set AUTH_JWKS_URL \(or AUTH_JWT_SECRET\), or set AUTH_API_KEYS_ONLY=1/,
    ],
    ["AUTH_JWT_ISSUER", /^AUTH_JWT_ISSUER is not set/],
    ["AUTH_JWT_AUDIENCE", /^AUTH_JWT_AUDIENCE is not set/],
  ];
  it.each(missing)("without %s, naming it in one line", (setting, line) => {
    const refusals = refusalsOf({ ...production, [setting]: undefined });
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toMatch(line);
  });

  it("with AUTH=dev", () => {
    expect(refusalsOf({ ...production, AUTH: "dev" })).toEqual([
      expect.stringMatching(/^AUTH=dev is set: it lets any caller act as any user; unset it/),
    ]);
  });

  it("with INNGEST_DEV set", () => {
    expect(refusalsOf({ ...production, INNGEST_DEV: "1" })).toEqual([
      expect.stringMatching(/^INNGEST_DEV is set: production never serves the Inngest dev server/),
    ]);
  });

  it("with nothing configured, one line per missing setting", () => {
    expect(refusalsOf({ NODE_ENV: "production" })).toHaveLength(5);
  });

  it("startServer refuses before opening anything, listing what is missing", async () => {
    vi.stubEnv("NODE_ENV", "production");
    for (const setting of Object.keys(production).filter((name) => name !== "NODE_ENV")) vi.stubEnv(setting, "");
    vi.stubEnv("INNGEST_DEV", "");
    vi.stubEnv("AUTH", "");
    const refused = startServer();
    await expect(refused).rejects.toThrow(
      /^refusing to start:\n {2}INNGEST_SIGNING_KEY is not set.*\n {2}INNGEST_SERVE_ORIGIN is not set.*\n {2}INNGEST_EVENT_KEY is not set.*\n {2}DATABASE_URL is not set.*\n {2}No JWT verification/,
    );
  });
  afterEach(() => {
    vi.unstubAllEnvs();
  });
});

describe("outside production", () => {
  it("serves the Inngest dev server only when INNGEST_DEV chooses it", () => {
    expect(refusalsOf({})).toEqual([
      expect.stringMatching(
        /^INNGEST_SIGNING_KEY is not set: .* or set INNGEST_DEV=1 to serve the local Inngest dev server/,
      ),
    ]);
    expect(refusalsOf({ INNGEST_DEV: "0" })).toHaveLength(1);
    expect(refusalsOf({ INNGEST_DEV: "1" })).toEqual([]);
    expect(refusalsOf({ INNGEST_DEV: "http://localhost:8288" })).toEqual([]);
    expect(refusalsOf({ INNGEST_SIGNING_KEY: "signkey-test-00" })).toEqual([]);
    expect(refusalsOf({ INNGEST_DEV: "1", AUTH: "dev" })).toEqual([]);
  });

  it("refuses both a JWKS URL and a shared secret", () => {
    expect(
      refusalsOf({ INNGEST_DEV: "1", AUTH_JWKS_URL: production.AUTH_JWKS_URL, AUTH_JWT_SECRET: "s".repeat(32) }),
    ).toEqual([expect.stringMatching(/^AUTH_JWKS_URL and AUTH_JWT_SECRET are both set: keep one/)]);
  });

  it("refuses unusable auth settings with a message naming them", () => {
    expect(() => readEnvironment({ AUTH: "yes" })).toThrow(/AUTH accepts only "dev"/);
    expect(() => readEnvironment({ AUTH_JWT_SECRET: "short" })).toThrow(
      /AUTH_JWT_SECRET must be at least 32 characters/,
    );
    expect(() => readEnvironment({ AUTH_JWKS_URL: "not a url" })).toThrow(/AUTH_JWKS_URL must be the URL/);
    expect(() => readEnvironment({ AUTH_JWT_CLOCK_SKEW: "3600" })).toThrow(/AUTH_JWT_CLOCK_SKEW/);
  });
});

describe("POST /api/inngest", () => {
  /**
   * Drives a chat turn for a victim's new thread the way the Inngest executor would, without a
   * signature: each answer's completed steps are sent back as memoized state, until a history
   * step has written or the endpoint refuses.
   */
  async function driveUnsigned(serving: InngestServing, headers: Record<string, string> = {}) {
    const functions = createFunctions({ db: bed.db.pool, model: scriptedModel(bed.model) });
    const { app } = createTestApp(bed.db.pool, { functions, serving });
    const event = {
      name: "chat/message.sent",
      data: { messageId: randomUUID(), userId: "victim", content: "written by a stranger" },
      id: randomUUID(),
      ts: Date.now(),
    };
    const runId = randomUUID();
    const steps: Record<string, unknown> = {};
    const statuses: number[] = [];
    const before = await countRows(bed.db.pool);
    const written = async () => {
      const now = await countRows(bed.db.pool);
      return {
        threads: now.threads - before.threads,
        messages: now.messages - before.messages,
        turns: now.turns - before.turns,
      };
    };
    for (let request = 0; request < 4 && (await written()).messages === 0; request++) {
      const body = JSON.stringify({
        event,
        events: [event],
        steps,
        ctx: { run_id: runId, attempt: 0, stack: { stack: Object.keys(steps), current: Object.keys(steps).length } },
        version: 2,
      });
      const response = await app.request("/api/inngest?fnId=threadline-chat-turn&stepId=step", {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body,
      });
      statuses.push(response.status);
      if (response.status !== 206) break;
      for (const op of (await response.json()) as { id: string; data?: unknown }[])
        steps[op.id] = { type: "data", data: op.data ?? null };
    }
    return { statuses, rows: await written() };
  }

  it("in production (signing key set) an unsigned or wrongly signed request is refused and runs nothing", async () => {
    const cloud: InngestServing = { mode: "cloud", signingKey: production.INNGEST_SIGNING_KEY! };
    expect(await driveUnsigned(cloud)).toEqual({ statuses: [401], rows: { threads: 0, messages: 0, turns: 0 } });
    const forged = { "x-inngest-signature": `t=${Math.floor(Date.now() / 1000)}&s=${"ab".repeat(32)}` };
    expect(await driveUnsigned(cloud, forged)).toEqual({
      statuses: [401],
      rows: { threads: 0, messages: 0, turns: 0 },
    });
    // The mode is passed to the handler, not read from the environment at request time.
    vi.stubEnv("INNGEST_DEV", "1");
    expect(await driveUnsigned(cloud)).toEqual({ statuses: [401], rows: { threads: 0, messages: 0, turns: 0 } });
    vi.unstubAllEnvs();
    expect(bed.model.requests).toHaveLength(0);
  });

  it("the same requests to the dev server (chosen with INNGEST_DEV) do run the turn: what production mode prevents", async () => {
    const { statuses, rows } = await driveUnsigned({ mode: "dev" });
    expect(statuses.every((status) => status === 206)).toBe(true);
    expect(rows.messages).toBe(1);
  });
});
