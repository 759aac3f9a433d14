import type { Browser, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { listApprovals } from "../src/history/approvals.js";
import { hasChromium, launchChromium, reportMissingChromium, saveScreenshot } from "./helpers/chromium.js";
import { startLiveApp, type LiveApp } from "./helpers/live-app.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

/** An upper bound on a condition coming true, never a wait (the machine may be shared and loaded). */
const PATIENCE_MS = 30_000;
const eventually = <T>(read: () => T | Promise<T>) => expect.poll(read, { timeout: PATIENCE_MS, interval: 50 });

let app: LiveApp;
let browser: Browser;
let page: Page;
let pageProblems: string[] = [];

async function openPlayground() {
  await page?.close();
  page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
  page.setDefaultTimeout(PATIENCE_MS);
  pageProblems = [];
  page.on("pageerror", (error) => pageProblems.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error") pageProblems.push(message.text());
  });
  await page.goto(app.url);
  await page.getByLabel("User name").fill("user-1");
  await page.getByRole("button", { name: "Sign in" }).click();
  await eventually(() => page.getByText("Signed in as user-1").isVisible()).toBe(true);
}

const DICE_CALL = { name: "roll_dice", id: "call_dice_browser", arguments: { count: 2, sides: 6 } };

if (!hasChromium) {
  reportMissingChromium("the playground's approvals in a real browser");
} else {
  beforeAll(async () => {
    // The default configuration's demo tool; a day to decide (in the engine's virtual time).
    app = await startLiveApp(bed.db.pool, bed.model, {
      approvals: { tools: [], expiryMinutes: 24 * 60, demoTool: true },
    });
    browser = await launchChromium();
  });

  afterEach(async () => {
    await page?.close();
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  describe("the playground's tool approvals, in chromium", { timeout: 120_000 }, () => {
    for (const decision of ["Approve", "Deny"] as const) {
      it(`shows the tool call with its arguments, again after a reload mid-wait; ${decision} goes on with the answer`, async () => {
        const answer = decision === "Approve" ? "You rolled a 3 and a 5." : "Fine, no dice.";
        bed.model.script({ toolCalls: [DICE_CALL] }, { text: answer });
        await openPlayground();
        await page.getByRole("textbox", { name: "Message", exact: true }).fill("Roll two dice");
        await page.getByRole("button", { name: "Send" }).click();

        const card = page.getByRole("group", { name: "Approval of roll_dice" });
        await eventually(() => card.isVisible()).toBe(true);
        expect(JSON.parse(await card.locator("pre").innerText())).toEqual(DICE_CALL.arguments);
        await eventually(() => page.locator("#messages li.user").innerText()).toContain("waiting for your approval");

        // Reloaded mid-wait: the page rebuilds the request from the thread.
        await page.reload();
        await eventually(() => card.isVisible()).toBe(true);
        expect(JSON.parse(await card.locator("pre").innerText())).toEqual(DICE_CALL.arguments);
        if (decision === "Approve") await saveScreenshot(page, "playground-approval", true);

        await card.getByRole("button", { name: decision }).click();
        const run = app.runs.at(-1)!;
        expect((await run.execution).error).toBeUndefined();
        await eventually(() => page.locator("#messages li.assistant").last().innerText()).toContain(answer);
        await eventually(() => card.count()).toBe(0);
        expect((await run.execution).stepIds.includes("tool.roll-dice")).toBe(decision === "Approve");
        const threadId = run.event.data.threadId as string;
        expect(await listApprovals(bed.db.pool, { threadId, userId: "user-1" })).toMatchObject([
          { status: decision === "Approve" ? "approved" : "denied", decidedBy: "user" },
        ]);
        expect(pageProblems).toEqual([]);
      });
    }
  });
}
