import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { failureLimiter } from "../src/auth/failure-limit.js";
import { authSettings, readEnvironment } from "../src/config.js";
import { createPool } from "../src/platform/database.js";
import { createTestApp, testAuth, tokenFor, listen, type Listening } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

describe("the app's database sessions", () => {
  it("carry a statement timeout and an idle-in-transaction timeout by default", async () => {
    const { rows } = await bed.db.pool.query<{ statement: string; idle: string }>(
      "SELECT current_setting('statement_timeout') AS statement, current_setting('idle_in_transaction_session_timeout') AS idle",
    );
    expect(rows[0]).toEqual({ statement: "30s", idle: "1min" });
    const env = readEnvironment({});
    expect([env.DATABASE_STATEMENT_TIMEOUT_MS, env.DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS]).toEqual([30_000, 60_000]);
  });

  it("end a statement that runs too long, and a session left idle inside a transaction", async () => {
    const pool = createPool(bed.db.url, { statementTimeoutMs: 200, idleInTransactionTimeoutMs: 300 });
    try {
      await expect(pool.query("SELECT pg_sleep(5)")).rejects.toMatchObject({ code: "57014" });
      const client = await pool.connect();
      client.on("error", () => undefined);
      await client.query("BEGIN");
      await client.query("SELECT 1");
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      await expect(client.query("SELECT 1")).rejects.toThrow();
      client.release(true);
      // The pool itself still serves.
      expect((await pool.query<{ one: number }>("SELECT 1 AS one")).rows[0]!.one).toBe(1);
    } finally {
      await pool.end();
    }
  });
});

describe("failed authentications per client address", () => {
  let server: Listening;
  beforeAll(async () => {
    const { app } = createTestApp(bed.db.pool, {
      auth: { ...testAuth, failureLimit: { perMinute: 3, addressHeader: "x-forwarded-for" } },
    });
    server = await listen(app.fetch);
  });
  afterAll(() => server.close());

  const list = (headers: Record<string, string>) => fetch(`${server.url}/api/threads`, { headers });

  it("answers 429 with Retry-After once an address has failed too often, before looking at its credentials", async () => {
    const from = { "x-forwarded-for": "203.0.113.7, 198.51.100.1" };
    // Sending no credentials is not guessing: it spends nothing.
    for (let i = 0; i < 5; i++) expect((await list(from)).status).toBe(401);
    for (let i = 0; i < 3; i++) expect((await list({ ...from, authorization: "Bearer not-a-token" })).status).toBe(401);
    const limited = await list({ ...from, authorization: "Bearer not-a-token" });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(await limited.json()).toMatchObject({ code: "too_many_failures" });
    // Even a good token waits: the address is refused before its credentials are checked.
    expect((await list({ ...from, authorization: `Bearer ${await tokenFor("user-1")}` })).status).toBe(429);
    // The limit is the address's (the last value of the proxy's header), not everyone's.
    expect(
      (
        await list({
          "x-forwarded-for": "203.0.113.7, 198.51.100.2",
          authorization: `Bearer ${await tokenFor("user-1")}`,
        })
      ).status,
    ).toBe(200);
    expect((await list({ "x-forwarded-for": "198.51.100.3", authorization: "Bearer not-a-token" })).status).toBe(401);
  });

  it("refills: one more attempt per 60/perMinute seconds", () => {
    let now = 0;
    const limiter = failureLimiter({ perMinute: 3 }, () => now);
    for (let i = 0; i < 3; i++) {
      expect(limiter.retryAfter("a")).toBeUndefined();
      limiter.failed("a");
    }
    expect(limiter.retryAfter("a")).toBe(20);
    now = 19_000;
    expect(limiter.retryAfter("a")).toBe(1);
    now = 20_000;
    expect(limiter.retryAfter("a")).toBeUndefined();
  });

  it("is configured by AUTH_FAILURES_PER_MINUTE (default 20; 0 switches it off) and AUTH_CLIENT_ADDRESS_HEADER", () => {
    expect(authSettings(readEnvironment({})).failureLimit).toEqual({ perMinute: 20 });
    expect(authSettings(readEnvironment({ AUTH_FAILURES_PER_MINUTE: "0" })).failureLimit).toBeUndefined();
    expect(
      authSettings(readEnvironment({ AUTH_FAILURES_PER_MINUTE: "5", AUTH_CLIENT_ADDRESS_HEADER: "X-Real-IP" }))
        .failureLimit,
    ).toEqual({ perMinute: 5, addressHeader: "X-Real-IP" });
  });
});
