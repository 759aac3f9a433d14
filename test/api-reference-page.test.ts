import { existsSync, mkdirSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp, listen, type Listening } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

/** Debian's chromium (apt-get install chromium); the test never downloads a browser. */
const CHROMIUM = "/usr/bin/chromium";
const ARTIFACTS = "test-artifacts";

const bed = useTestBed();

let server: Listening | undefined;
let origin: string;
let browser: Browser | undefined;

beforeAll(async () => {
  const { app } = createTestApp(bed.db.pool);
  server = await listen(app.fetch);
  origin = server.url;
  if (existsSync(CHROMIUM)) browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await server?.close();
});

describe("/docs, offline, in chromium", () => {
  it("renders the API reference with every request to another origin refused", async (context) => {
    if (!browser) {
      if (process.env.REQUIRE_BROWSER === "1")
        expect.fail(`${CHROMIUM} is missing and REQUIRE_BROWSER=1: install it with apt-get install -y chromium`);
      console.warn(`reference page browser test skipped: ${CHROMIUM} is missing (apt-get install chromium)`);
      return context.skip();
    }
    const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
    const elsewhere: string[] = [];
    const problems: string[] = [];
    // As offline: whatever is not this app never answers.
    await page.route("**/*", (route) =>
      route.request().url().startsWith(`${origin}/`)
        ? route.continue()
        : (elsewhere.push(route.request().url()), route.abort("internetdisconnected")),
    );
    page.on("pageerror", (error) => problems.push(error.message));
    page.on("console", (message) => {
      if (message.type() === "error") problems.push(`${message.text()} (${message.location().url})`);
    });
    await page.goto(`${origin}/docs`);
    // Swagger UI has read /openapi.json: the API's title, a tag and an operation are on the page.
    await expect
      .poll(() => page.locator(".swagger-ui .info .title").textContent(), { timeout: 20_000 })
      .toContain("Threadline");
    await expect
      .poll(() => page.locator(".opblock-summary-path", { hasText: "/api/threads/{threadId}/stop" }).count(), {
        timeout: 10_000,
      })
      .toBeGreaterThan(0);
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: `${ARTIFACTS}/api-reference.png` });
    expect(elsewhere).toEqual([]);
    expect(problems).toEqual([]);
    await page.close();
  }, 60_000);
});
