import type { Browser, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startAppProcess, type AppProcess } from "./helpers/app-process.js";
import {
  hasChromium,
  launchChromium,
  liveTexts,
  recordLiveTexts,
  reportMissingChromium,
  saveScreenshot,
} from "./helpers/chromium.js";
import { startEngineStandIn, type EngineStandIn } from "./helpers/engine-stand-in.js";
import { gate, type Gate } from "./helpers/model-server.js";
import { useTestBed } from "./helpers/test-bed.js";

/**
 * A newcomer's first run (issue 16): `npm run dev` (scripts/dev.ts as a child process, started as
 * the README's quick start says, with the model named by OPENAI_API_KEY, OPENAI_BASE_URL and MODEL),
 * then the playground in chromium: sign in, type a message, press Enter, watch the answer arrive.
 *
 * Two things differ from a newcomer's machine, both because this machine cannot download the Inngest
 * dev server: INNGEST_BASE_URL names a stand-in for it on loopback (test/helpers/engine-stand-in.ts,
 * which also performs step.ai.infer in gateway mode), and the test registers the app there as
 * `inngest dev -u` does. The model is the scripted one; the database is this file's own.
 */
const bed = useTestBed();

/** An upper bound on any one condition coming true (the machine may be shared and loaded), never a wait. */
const PATIENCE_MS = 30_000;
const eventually = <T>(read: () => T | Promise<T>) => expect.poll(read, { timeout: PATIENCE_MS, interval: 50 });

const USER = "newcomer";
const MESSAGE = "Hello, Threadline! What can you do?";

let browser: Browser;
let page: Page | undefined;
const apps: AppProcess[] = [];
const engines: EngineStandIn[] = [];
/** Model replies held by the running test: released after it, whatever happened, so no run waits on them. */
const heldReplies: Gate[] = [];

/** `npm run dev` with the quick start's model settings (and `extra`), registered with a fresh engine stand-in. */
async function npmRunDev(extra: Record<string, string> = {}) {
  const engine = await startEngineStandIn();
  engines.push(engine);
  const app = await startAppProcess("scripts/dev.ts", {
    DATABASE_URL: bed.db.url,
    INNGEST_BASE_URL: engine.url,
    OPENAI_API_KEY: "sk-first-run",
    OPENAI_BASE_URL: bed.model.baseUrl,
    MODEL: "scripted-model",
    ...extra,
  });
  apps.push(app);
  await engine.registerApp(`${app.url}/api/inngest`);
  return { app, engine };
}

/** A fresh tab on the playground, recording what the page reports as broken, signed in as USER. */
async function openPlayground(url: string) {
  await page?.close();
  page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
  page.setDefaultTimeout(PATIENCE_MS);
  const problems: string[] = [];
  page.on("pageerror", (error) => problems.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(`${message.text()} (${message.location().url})`);
  });
  await recordLiveTexts(page);
  await page.goto(url);
  await page.getByLabel("User name").fill(USER);
  await page.getByRole("button", { name: "Sign in" }).click();
  const tab = page;
  await eventually(() => tab.getByText(`Signed in as ${USER}`).isVisible()).toBe(true);
  return { page: tab, problems };
}

/** Types the message into the composer key by key and sends it with Enter. */
async function typeAndPressEnter(tab: Page) {
  const composer = tab.getByRole("textbox", { name: "Message", exact: true });
  await composer.click();
  await tab.keyboard.type(MESSAGE);
  await composer.press("Enter");
}

/** What the model was asked first: the turn's request; its last message must be the one typed. */
function turnRequest() {
  const request = bed.model.requests[0];
  expect(request, "the model received no request").toBeDefined();
  return request!;
}

/** The chat event the engine stand-in got from the app, for the thread the page opened. */
async function chatEvent(engine: EngineStandIn, tab: Page) {
  await eventually(() => tab.url()).toMatch(/#\/threads\/[^/]+$/);
  const threadId = decodeURIComponent(tab.url().split("#/threads/")[1]!);
  expect(engine.events.filter((e) => e.name === "chat/message.sent").map((e) => e.data)).toEqual([
    expect.objectContaining({ threadId, userId: USER, content: MESSAGE }),
  ]);
  const run = await engine.runFor((r) => r.fnId === "threadline-chat-turn" && r.event.data.threadId === threadId);
  await run.ended;
  return run;
}

if (!hasChromium) {
  reportMissingChromium("the first run in a real browser");
} else {
  beforeAll(async () => {
    browser = await launchChromium();
  });

  afterEach(async () => {
    for (const held of heldReplies.splice(0)) held.release();
    await page?.close();
    page = undefined;
  });

  afterAll(async () => {
    for (const held of heldReplies.splice(0)) held.release();
    await browser?.close();
    for (const app of apps.splice(0)) await app.stop();
    for (const engine of engines.splice(0)) await engine.close();
  });

  // A real process, a real browser and real turns: minutes are an upper bound on a loaded machine.
  describe("a fresh clone: npm run dev, then the playground in chromium", { timeout: 120_000 }, () => {
    it("INFERENCE=stream: a typed message sent with Enter is answered, the answer showing in pieces as the model streams it", async () => {
      const pieces = ["Hello ", "there, ", "newcomer. ", "I keep ", "your conversations."];
      const answer = pieces.join("");
      const held = gate();
      heldReplies.push(held);
      // Pauses well beyond the writer's batching (DELTA_FLUSH_MS): the pieces reach the thread log, and the page, apart.
      bed.model.script(
        { text: answer, stream: { chunks: pieces, pauseMs: 250, holdAfter: { chunks: 3, gate: held } } },
        { text: "A first conversation" },
      );
      const { app, engine } = await npmRunDev({ INFERENCE: "stream" });

      const { page: tab, problems } = await openPlayground(app.url);
      await eventually(() => tab.locator("#model-info").textContent()).toBe(
        "Model: scripted-model (openai) · inference: stream",
      );
      await saveScreenshot(tab, "first-run-stream-1-before-send");

      await typeAndPressEnter(tab);
      await held.reached;
      const live = tab.locator("#live-answer");
      await eventually(async () => ((await live.isVisible()) ? (await live.textContent())?.trim() : null)).toBe(
        "Hello there, newcomer.",
      );
      // At least two pieces shown, one after the other, while the model is still writing the answer.
      const midAnswer = await liveTexts(tab);
      expect(midAnswer.length, JSON.stringify(midAnswer)).toBeGreaterThanOrEqual(2);
      expect(
        midAnswer.every((text, i) => answer.startsWith(text) && (i === 0 || text.length > midAnswer[i - 1]!.length)),
        JSON.stringify(midAnswer),
      ).toBe(true);
      expect(await tab.locator("#messages li.assistant").count()).toBe(0);
      await saveScreenshot(tab, "first-run-stream-2-mid-answer");

      held.release();
      const answers = tab.locator("#messages li.assistant");
      await eventually(() => answers.count()).toBe(1);
      expect(await answers.innerText()).toContain(answer);
      await eventually(() => live.isHidden()).toBe(true);
      expect(await tab.locator("#messages li.user").innerText()).toContain(MESSAGE);
      await saveScreenshot(tab, "first-run-stream-3-answered");

      // Everything the arriving answer showed was a growing beginning of it.
      const shown = await liveTexts(tab);
      expect(
        shown.every((text, i) => answer.startsWith(text) && (i === 0 || text.length > shown[i - 1]!.length)),
        JSON.stringify(shown),
      ).toBe(true);
      const run = await chatEvent(engine, tab);
      expect(run.status).toBe("completed");
      // The app called the model itself, streaming; the engine performed no inference.
      const request = turnRequest();
      expect(request).toMatchObject({ model: "scripted-model", stream: true });
      expect(request.messages.at(-1)).toMatchObject({ role: "user", content: MESSAGE });
      expect(run.inferences).toEqual([]);
      expect(problems).toEqual([]);
    });

    it("the default inference (gateway): a typed message sent with Enter is answered through the engine", async () => {
      bed.model.script({ text: "Hello, newcomer. Ask me anything." }, { text: "A first conversation" });
      const { app, engine } = await npmRunDev();

      const { page: tab, problems } = await openPlayground(app.url);
      await eventually(() => tab.locator("#model-info").textContent()).toBe(
        "Model: scripted-model (openai) · inference: gateway",
      );
      await saveScreenshot(tab, "first-run-gateway-1-before-send");

      await typeAndPressEnter(tab);
      const answers = tab.locator("#messages li.assistant");
      await eventually(() => answers.count()).toBe(1);
      expect(await answers.innerText()).toContain("Hello, newcomer. Ask me anything.");
      expect(await tab.locator("#messages li.user").innerText()).toContain(MESSAGE);
      await saveScreenshot(tab, "first-run-gateway-3-answered");

      const run = await chatEvent(engine, tab);
      expect(run.status).toBe("completed");
      // The engine (the stand-in, as the dev server would) called the model for the turn.
      expect(run.inferences).toEqual([{ url: new URL("chat/completions", bed.model.baseUrl).href, status: 200 }]);
      const request = turnRequest();
      expect(request.model).toBe("scripted-model");
      expect(request.stream).not.toBe(true);
      expect(request.messages.at(-1)).toMatchObject({ role: "user", content: MESSAGE });
      expect(problems).toEqual([]);
    });
  });
}
