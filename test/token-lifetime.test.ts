import { SignJWT } from "jose";
import { beforeAll, describe, expect, it } from "vitest";
import { authSettings, readEnvironment } from "../src/config.js";
import { createTestApp, TEST_JWT, testAuth, tokenFor } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();
const now = () => Math.floor(Date.now() / 1000);

/** A token without an iat claim, expiring at `exp`. */
const withoutIat = (exp: number) =>
  new SignJWT({})
    .setProtectedHeader({ alg: "HS256" })
    .setSubject("carol")
    .setIssuer(TEST_JWT.issuer)
    .setAudience(TEST_JWT.audience)
    .setExpirationTime(exp)
    .sign(new TextEncoder().encode(TEST_JWT.secret));

describe("AUTH_JWT_MAX_AGE: the longest token lifetime accepted", () => {
  let app: ReturnType<typeof createTestApp>["app"];
  beforeAll(() => {
    app = createTestApp(bed.db.pool, {
      auth: { ...testAuth, jwt: { ...testAuth.jwt!, clockSkewSeconds: 30, maxAgeSeconds: 3600 } },
    }).app;
  });
  const list = (token: string) => app.request("/api/threads", { headers: { authorization: `Bearer ${token}` } });

  it("refuses a token whose exp − iat exceeds it (an exp in the year 3000), saying why", async () => {
    expect((await list(await tokenFor("carol", { issuedAt: now(), expiresAt: now() + 3600 }))).status).toBe(200);
    const forever = await list(await tokenFor("carol", { issuedAt: now(), expiresAt: Date.UTC(3000, 0, 1) / 1000 }));
    expect(forever.status).toBe(401);
    expect(((await forever.json()) as { error: string }).error).toMatch(
      /exp - iat.*longer than this server accepts \(AUTH_JWT_MAX_AGE: 3600 s\)/,
    );
    // An old token that was issued long ago for a short time is judged by its lifetime, not its age.
    expect((await list(await tokenFor("carol", { issuedAt: now() - 3000, expiresAt: now() + 500 }))).status).toBe(200);
    expect((await list(await tokenFor("carol", { issuedAt: now() - 3000, expiresAt: now() + 700 }))).status).toBe(401);
  });

  it("judges a token without iat by exp − now", async () => {
    expect((await list(await withoutIat(now() + 1800))).status).toBe(200);
    const response = await list(await withoutIat(now() + 7200));
    expect(response.status).toBe(401);
    expect(((await response.json()) as { error: string }).error).toMatch(/from now \(it has no iat\)/);
  });

  it("is read as seconds or with a unit, and is unset by default", () => {
    expect(authSettings(readEnvironment({ AUTH_JWT_SECRET: TEST_JWT.secret })).jwt!.maxAgeSeconds).toBeUndefined();
    expect(
      authSettings(readEnvironment({ AUTH_JWT_SECRET: TEST_JWT.secret, AUTH_JWT_MAX_AGE: "24h" })).jwt!.maxAgeSeconds,
    ).toBe(86_400);
    expect(
      authSettings(readEnvironment({ AUTH_JWT_SECRET: TEST_JWT.secret, AUTH_JWT_MAX_AGE: "900" })).jwt!.maxAgeSeconds,
    ).toBe(900);
    expect(() => readEnvironment({ AUTH_JWT_MAX_AGE: "forever" })).toThrow(/AUTH_JWT_MAX_AGE must be a duration/);
  });
});
