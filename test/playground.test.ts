import fc from "fast-check";
import type { Browser, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { MODEL_NOT_CONFIGURED } from "../src/agents/model.js";
import { createApiKey } from "../src/auth/api-keys.js";
import { TURN_ENDED_ERROR } from "../src/functions/streaming-inference.js";
import { appendEvents, type ThreadEvent } from "../src/history/events.js";
import { streamedTexts } from "../src/stream/deltas.js";
import {
  hasChromium,
  launchChromium,
  liveTexts as liveTextsOf,
  recordLiveTexts,
  reportMissingChromium,
  saveScreenshot,
} from "./helpers/chromium.js";
import { startLiveApp, type LiveApp } from "./helpers/live-app.js";
import { gate, type Gate } from "./helpers/model-server.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

/**
 * How long a condition may take to come true before the test fails: only an upper bound, never a
 * wait (every wait is on a condition), generous because the machine may be shared and loaded.
 */
const PATIENCE_MS = 30_000;

/** Polls until the assertion holds (see PATIENCE_MS). */
const eventually = <T>(read: () => T | Promise<T>) => expect.poll(read, { timeout: PATIENCE_MS, interval: 50 });

/** Model replies held by the running test: released after it, whatever happened, so no run waits on them. */
const heldReplies: Gate[] = [];
function holdReply(): Gate {
  const held = gate();
  heldReplies.push(held);
  return held;
}

let app: LiveApp;
let browser: Browser;
let page: Page;
/** What the page reported as broken: uncaught errors and console errors (a CSP violation is one). */
let pageProblems: string[] = [];
/** The Last-Event-ID of each request for the event stream the page made. */
let resumedFrom: (string | undefined)[] = [];
/** The page's requests still under way, the endless event stream aside. */
let inFlight = new Set<unknown>();

/** A fresh tab (its own sessionStorage) on the playground, signed in as user-1 unless told otherwise. */
async function openPlayground({ signIn = true, url = app.url } = {}) {
  await page?.close();
  page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
  page.setDefaultTimeout(PATIENCE_MS);
  pageProblems = [];
  resumedFrom = [];
  inFlight = new Set();
  page.on("pageerror", (error) => pageProblems.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error") pageProblems.push(`${message.text()} (${message.location().url})`);
  });
  page.on("request", (request) => {
    if (request.url().endsWith("/events")) resumedFrom.push(request.headers()["last-event-id"]);
    else inFlight.add(request);
  });
  page.on("requestfinished", (request) => inFlight.delete(request));
  page.on("requestfailed", (request) => inFlight.delete(request));
  await recordLiveTexts(page);
  await page.goto(url);
  if (!signIn) return;
  await page.getByLabel("User name").fill("user-1");
  await page.getByRole("button", { name: "Sign in" }).click();
  await eventually(() => page.getByText("Signed in as user-1").isVisible()).toBe(true);
  expect(await page.getByRole("button", { name: "Sign in" }).isHidden()).toBe(true);
}

if (!hasChromium) {
  reportMissingChromium("the playground in a real browser");
} else {
  beforeAll(async () => {
    app = await startLiveApp(bed.db.pool, bed.model);
    browser = await launchChromium();
  });

  afterEach(async () => {
    for (const held of heldReplies.splice(0)) held.release();
    await page?.close();
  });

  afterAll(async () => {
    for (const held of heldReplies.splice(0)) held.release();
    await browser?.close();
    await app?.close();
  });

  // Each test drives real turns through a real browser: minutes are an upper bound on a loaded machine.
  describe("the playground page, in chromium", { timeout: 120_000 }, () => {
    it("signs in, sends a message, shows the answer growing as the model streams it, resumes it after a reload and a dropped connection without repeating text, then shows the stored answer", async () => {
      const answer = ["The ", "quick ", "brown ", "fox ", "jumps ", "over ", "the ", "lazy ", "dog."];
      const full = answer.join("");
      const held = holdReply();
      // Pauses well beyond the writer's batching (DELTA_FLUSH_MS), so the chunks reach the log as separate deltas.
      bed.model.script({ text: full, stream: { chunks: answer, pauseMs: 250, holdAfter: { chunks: 4, gate: held } } });

      await openPlayground();
      await page.getByRole("textbox", { name: "Message", exact: true }).fill("Tell me about the fox");
      await page.getByRole("button", { name: "Send" }).click();
      await held.reached;
      const run = app.runs.at(-1)!;
      const threadId = run.event.data.threadId as string;
      expect(page.url()).toBe(`${app.url}/#/threads/${threadId}`);
      await eventually(() => liveAnswer()).toBe("The quick brown fox");
      expect(await page.getByRole("button", { name: "Stop" }).isEnabled()).toBe(true);
      const beforeReload = await liveTexts();

      const lastSeen = await lastEventId(threadId);
      await page.reload();
      // Shown again at once from what the tab kept, and resumed after the last event it had seen.
      await eventually(() => liveAnswer()).toBe("The quick brown fox");
      await eventually(() => resumedFrom.at(-1)).toBe(String(lastSeen));

      // A dropped connection resumes the same way, after the last event the page had.
      await dropAndExpectResumeAfter(lastSeen);

      held.release();
      expect((await run.execution).error).toBeUndefined();
      const answerItem = page.locator("#messages li.assistant");
      await eventually(() => answerItem.count()).toBe(1);
      expect(await answerItem.innerText()).toContain(full);
      // The turn's tokens and cost, as the model reported them (the scripted model has no price).
      await eventually(() => answerItem.locator(".usage").textContent()).toBe(
        "120 tokens (100 in, 20 out) · no price · scripted-model",
      );
      await eventually(() => page.locator("#live-answer").isHidden()).toBe(true);
      await eventually(() => page.getByRole("button", { name: "Stop" }).isDisabled()).toBe(true);
      expect(await page.locator("#messages li.user").innerText()).toContain("Tell me about the fox");
      await dropAndExpectResumeAfter(await lastEventId(threadId));

      // What the answer showed, before and after the reload: the answer's beginnings, growing, never a repeat.
      const afterReload = await liveTexts();
      for (const shown of [beforeReload, afterReload]) {
        expect(
          shown.every((text, i) => full.startsWith(text) && (i === 0 || text.length > shown[i - 1]!.length)),
          JSON.stringify(shown),
        ).toBe(true);
      }
      expect(afterReload[0]).toBe("The quick brown fox");
      expect(beforeReload.length + afterReload.length - 1).toBeGreaterThanOrEqual(4);

      await saveScreenshot(page, "playground", true);
      // The browser logs each cut connection itself; nothing else went wrong.
      expect(pageProblems).toEqual(
        Array(2).fill(expect.stringMatching(/net::ERR_INCOMPLETE_CHUNKED_ENCODING \(.*\/events\)$/)),
      );
    });

    it("stops the answer being written: the text so far stays, marked Stopped; nothing more arrives though the model goes on; the next message is answered at once", async () => {
      const held = holdReply();
      bed.model.script(
        {
          text: "The quick brown fox jumps over the lazy dog.",
          stream: {
            chunks: ["The ", "quick ", "brown fox ", "jumps over the lazy dog."],
            holdAfter: { chunks: 2, gate: held },
          },
        },
        { text: "Foxes are quick." },
      );
      await openPlayground();
      const stopBodies: unknown[] = [];
      page.on("request", (request) => {
        if (request.url().endsWith("/stop")) stopBodies.push(request.postDataJSON());
      });
      await sendMessage("Tell me about the fox");
      const answers = page.locator("#messages li.assistant");
      await held.reached;
      const run = app.runs.at(-1)!;
      await eventually(() => liveAnswer()).toBe("The quick");
      await page.getByRole("button", { name: "Stop" }).click();
      await eventually(() => answers.getByText("Stopped", { exact: true }).isVisible()).toBe(true);
      expect(await answers.innerText()).toContain("The quick");
      expect(await page.locator("#live-answer").isHidden()).toBe(true);
      expect(await page.getByRole("button", { name: "Stop" }).isDisabled()).toBe(true);
      expect(await page.locator("#status").textContent()).toBe("");
      // The page named the turn it showed arriving, and the stop cancelled that run.
      expect(stopBodies).toEqual([{ messageId: run.event.data.messageId }]);
      expect(run.cancelled).toBe(true);
      held.release();
      // The model goes on writing; its next text finds the turn stopped, which ends the run.
      expect(((await run.execution).error as Error).message).toBe(TURN_ENDED_ERROR);
      const shownBeforeNext = (await liveTexts()).length;

      await sendMessage("And then?");
      await eventually(() => answers.count()).toBe(2);
      expect(await answers.nth(1).innerText()).toContain("Foxes are quick.");
      const next = await app.runs.at(-1)!.execution;
      expect(next.stepIds.filter((id) => id.startsWith("history.wait-for-turn"))).toEqual([]);
      // The log reaches the page in order: text the model wrote after the stop would have come before this answer.
      expect(await answers.first().innerText()).not.toContain("brown");
      expect(await answers.first().getByText("Stopped", { exact: true }).isVisible()).toBe(true);
      const shown = await liveTexts();
      expect(
        shown.slice(0, shownBeforeNext).every((text) => "The quick ".startsWith(text)),
        JSON.stringify(shown),
      ).toBe(true);
      expect(
        shown.slice(shownBeforeNext).every((text) => "Foxes are quick.".startsWith(text)),
        JSON.stringify(shown),
      ).toBe(true);
      await saveScreenshot(page, "playground-stopped", true);
      expect(pageProblems).toEqual([]);
    });

    it("a stop that finds nothing running (another tab stopped the turn just before) says so without an error, and shows the turn stopped", async () => {
      const held = holdReply();
      bed.model.script({
        text: "Once upon a time.",
        stream: { chunks: ["Once ", "upon a time."], holdAfter: { chunks: 1, gate: held } },
      });
      await openPlayground();
      await sendMessage("Tell me a story");
      await held.reached;
      const run = app.runs.at(-1)!;
      await eventually(() => liveAnswer()).toBe("Once");
      const threadId = run.event.data.threadId as string;
      await page.route("**/stop", async (route) => {
        const elsewhere = await fetch(`${app.url}/api/threads/${threadId}/stop`, {
          method: "POST",
          headers: { "X-Threadline-User": "user-1", "content-type": "application/json" },
          body: "{}",
        });
        expect(elsewhere.status).toBe(202);
        await route.continue();
      });
      await page.getByRole("button", { name: "Stop" }).click();
      await eventually(() => page.getByRole("status").textContent()).toBe(
        "Nothing to stop: no answer is being written right now.",
      );
      const answer = page.locator("#messages li.assistant");
      await eventually(() => answer.getByText("Stopped", { exact: true }).isVisible()).toBe(true);
      expect(await answer.innerText()).toContain("Once");
      expect(await page.getByRole("button", { name: "Stop" }).isDisabled()).toBe(true);
      held.release();
      await run.execution;
      // The browser logs the refused request itself.
      expect(pageProblems).toEqual([expect.stringMatching(/status of 409 \(Conflict\)/)]);
    });

    it("a turn stopped before any text arrived offers Retry (there is no answer to regenerate), which answers the message", async () => {
      const held = holdReply();
      // The first content chunk is empty: the model is held having streamed no text at all.
      bed.model.script(
        {
          text: "Once upon a time.",
          stream: { chunks: ["", "Once upon a time."], holdAfter: { chunks: 1, gate: held } },
        },
        { text: "A short story." },
      );
      await openPlayground();
      await sendMessage("Tell me a story");
      await held.reached;
      const run = app.runs.at(-1)!;
      await eventually(() => page.locator("#messages li.user").innerText()).toContain("Tell me a story");
      await page.getByRole("button", { name: "Stop" }).click();
      await eventually(() => page.locator("#messages li.user").innerText()).toContain("stopped");
      held.release();
      await run.execution;
      expect(await page.locator("#messages li.assistant").count()).toBe(0);
      await page.getByRole("button", { name: "Retry" }).click();
      await eventually(() => page.locator("#messages li.assistant").textContent()).toContain("A short story.");
      expect(await page.getByRole("button", { name: "Retry" }).count()).toBe(0);
      expect(pageProblems).toEqual([]);
    });

    it("shows a failed turn's cause with Retry, which answers it; flips through the answer's variants; search opens the thread it found", async () => {
      bed.model.script(
        { status: 401, body: { error: { message: "Incorrect API key provided", type: "invalid_request_error" } } },
        { text: "A scaly anteater." },
        { text: "An armoured mammal." },
      );
      await openPlayground();
      await page.getByRole("button", { name: "New thread" }).click();
      await eventually(() => page.locator("#thread-title").textContent()).toBe("Untitled thread");
      await page.getByRole("textbox", { name: "Message", exact: true }).fill("What is a pangolin?");
      await page.getByRole("button", { name: "Send" }).click();

      const failure = page.locator("#messages .turn-state.failed");
      await eventually(() => failure.textContent()).toMatch(
        /^failed: The model provider answered HTTP 401: Incorrect API key provided/,
      );
      // A failed turn leaves the user's message alone on the thread.
      await eventually(() => page.locator("#threads a[aria-current=page] small").textContent()).toMatch(
        /^1 message · failed · /,
      );
      await screenshot("playground-failed");
      await page.getByRole("button", { name: "Retry" }).click();
      await eventually(() => page.locator("#messages li.assistant").textContent()).toContain("A scaly anteater.");
      expect(await failure.count()).toBe(0);

      await page.getByRole("button", { name: "Regenerate" }).click();
      await eventually(() => page.locator("#messages li.assistant").textContent()).toContain("An armoured mammal.");
      expect(await page.getByLabel("Answer variant 2 of 2").textContent()).toBe("2/2");
      await page.getByRole("button", { name: "Previous answer variant" }).click();
      await eventually(() => page.locator("#messages li.assistant").textContent()).toContain("A scaly anteater.");
      expect(await page.getByLabel("Answer variant 1 of 2").textContent()).toBe("1/2");
      const threadUrl = page.url();

      await page.getByRole("button", { name: "New thread" }).click();
      await eventually(() => page.url()).not.toBe(threadUrl);
      await page.getByRole("searchbox", { name: "Search messages" }).fill("pangolins");
      await page.getByRole("button", { name: "Search", exact: true }).click();
      const hit = page.getByRole("link", { name: /pangolin/ });
      expect(await hit.locator("mark").textContent()).toBe("pangolin");
      await hit.click();
      await eventually(() => page.url()).toBe(threadUrl);
      await eventually(() => page.locator("#messages li.user").textContent()).toContain("What is a pangolin?");
      expect(pageProblems).toEqual([]);
    });

    it("rates an answer thumbs up or down under it: the choice shows pressed, another replaces it, pressing it again takes it back; a reload shows what is stored", async () => {
      bed.model.script({ text: "Paris." });
      await openPlayground();
      await page.getByRole("button", { name: "New thread" }).click();
      await sendMessage("What is the capital of France?");
      const answer = page.locator("#messages li.assistant");
      await eventually(() => answer.textContent()).toContain("Paris.");
      const threadId = app.runs.at(-1)!.event.data.threadId as string;
      const stored = async () =>
        (
          await bed.db.pool.query<{ rating: string }>("SELECT rating FROM message_feedback WHERE thread_id = $1", [
            threadId,
          ])
        ).rows.map((row) => row.rating);
      const up = answer.getByRole("button", { name: "Good answer" });
      const down = answer.getByRole("button", { name: "Bad answer" });
      expect([await up.getAttribute("aria-pressed"), await down.getAttribute("aria-pressed")]).toEqual([
        "false",
        "false",
      ]);

      await up.click();
      await eventually(() => up.getAttribute("aria-pressed")).toBe("true");
      expect(await stored()).toEqual(["up"]);
      await screenshot("playground-feedback");
      await down.click();
      await eventually(() => down.getAttribute("aria-pressed")).toBe("true");
      expect(await up.getAttribute("aria-pressed")).toBe("false");
      expect(await stored()).toEqual(["down"]);

      await page.reload();
      await eventually(() => answer.getByRole("button", { name: "Bad answer" }).getAttribute("aria-pressed")).toBe(
        "true",
      );
      await answer.getByRole("button", { name: "Bad answer" }).click();
      await eventually(() => answer.getByRole("button", { name: "Bad answer" }).getAttribute("aria-pressed")).toBe(
        "false",
      );
      expect(await stored()).toEqual([]);
      expect(pageProblems).toEqual([]);
    });

    it("shows the model and inference mode; each turn's state: sending…, answering… while the answer streams, retrying 2/5 from turn.retrying, answering again once the retry streams; message counts in words", async () => {
      const held = holdReply();
      bed.model.script({
        text: "Foxes are quick and clever.",
        stream: { chunks: ["Foxes ", "are quick and clever."], holdAfter: { chunks: 1, gate: held } },
      });
      await openPlayground();
      await eventually(() => page.locator("#model-info").textContent()).toBe(
        "Model: scripted-model (openai) · inference: stream",
      );
      expect(await page.locator("#setup").isHidden()).toBe(true);

      // The send is held at the network: the message shows as sending until the server accepts it.
      let accept!: () => void;
      const accepted = new Promise<void>((resolve) => (accept = resolve));
      await page.route("**/api/chat", async (route) => {
        await accepted;
        await route.continue();
      });
      await sendMessage("Tell me about foxes");
      const userState = page.locator("#messages li.user .turn-state");
      await eventually(() => userState.textContent()).toBe("sending…");
      expect(await page.locator("#activity").textContent()).toBe("sending…");
      await screenshot("playground-sending");
      accept();

      await held.reached;
      const run = app.runs.at(-1)!;
      const { threadId, messageId } = run.event.data as { threadId: string; messageId: string };
      await eventually(() => liveAnswer()).toBe("Foxes");
      expect(await userState.textContent()).toBe("answering…");
      expect(await page.locator("#activity").textContent()).toBe("answering…");
      await screenshot("playground-answering");

      // An attempt failed and Inngest will retry the turn: the log says so (engineer 15's turn.retrying).
      const cause = "The model provider answered HTTP 503: overloaded";
      const retrying = {
        runId: run.runId,
        messageId,
        attempt: 2,
        maxAttempts: 5,
        cause,
        nextAttemptAt: new Date(Date.now() + 26_000).toISOString(),
      };
      await appendEvents(bed.db.pool, {
        threadId,
        runId: run.runId,
        attempt: 0,
        events: [{ key: "turn.retrying:0", event: "turn.retrying", data: retrying }],
      });
      await eventually(() => userState.textContent()).toBe(`retrying 2/5: ${cause}`);
      expect(await page.locator("#activity").textContent()).toBe(`retrying 2/5: ${cause}`);
      await screenshot("playground-retrying");

      // The next attempt streams: the page shows its text, not the failed attempt's, and answering again.
      const { rows } = await bed.db.pool.query<{ step_id: string }>(
        "SELECT data->>'stepId' AS step_id FROM thread_events WHERE thread_id = $1 AND event = 'text.delta' LIMIT 1",
        [threadId],
      );
      const delta = { runId: run.runId, stepId: rows[0]!.step_id, attempt: 1, delta: "Retried: foxes" };
      await appendEvents(bed.db.pool, {
        threadId,
        runId: run.runId,
        attempt: 1,
        events: [{ key: `${delta.stepId}:delta:0`, event: "text.delta", data: delta }],
      });
      await eventually(() => liveAnswer()).toBe("Retried: foxes");
      expect(await userState.textContent()).toBe("answering…");

      held.release();
      expect((await run.execution).error).toBeUndefined();
      await eventually(() => page.locator("#messages li.assistant").textContent()).toContain(
        "Foxes are quick and clever.",
      );
      expect(await userState.count()).toBe(0);
      expect(await page.locator("#activity").textContent()).toBe("");
      await eventually(() => page.locator("#threads a[aria-current=page] small").textContent()).toMatch(
        /^2 messages · completed · /,
      );
      expect(pageProblems).toEqual([]);
    });

    it("renders answers as sanitized Markdown (code blocks, lists, links that open apart; no script, no javascript: link, no remote image); Enter sends and Shift+Enter breaks a line; the composer stays in view in a long thread", async () => {
      const filler = Array.from({ length: 60 }, (_, i) => `Line ${i + 1} of a long answer.`).join("\n\n");
      const markdown = [
        "# Plan",
        "Some **strong** text and `inline code`.",
        "```js\nconst ok = 1 < 2;\n```",
        "- one\n- two",
        "[a safe link](https://example.com/x), [a bad one](javascript:window.injected=1) and ![a tracker](https://example.com/t.png)",
        "<script>window.injected = 2</script>",
        filler,
      ].join("\n\n");
      bed.model.script({ text: markdown });
      await openPlayground();
      const composer = page.getByRole("textbox", { name: "Message", exact: true });
      await composer.click();
      await page.keyboard.type("First line");
      await page.keyboard.press("Shift+Enter");
      await page.keyboard.type("second line");
      await page.keyboard.press("Enter");
      const answer = page.locator("#messages li.assistant");
      await eventually(() => answer.count()).toBe(1);
      expect(await page.locator("#messages li.user .text").textContent()).toBe("First line\nsecond line");
      expect(bed.model.requests.at(-1)!.messages.at(-1)).toMatchObject({
        role: "user",
        content: "First line\nsecond line",
      });
      expect(await composer.inputValue()).toBe("");

      expect(await answer.locator("h1").textContent()).toBe("Plan");
      expect(await answer.locator("strong").textContent()).toBe("strong");
      expect(await answer.locator("pre code.language-js").textContent()).toBe("const ok = 1 < 2;\n");
      expect(await answer.locator("ul li").allTextContents()).toEqual(["one", "two"]);
      const safe = answer.getByRole("link", { name: "a safe link" });
      expect(await safe.getAttribute("href")).toBe("https://example.com/x");
      expect(await safe.getAttribute("target")).toBe("_blank");
      expect(await safe.getAttribute("rel")).toContain("noopener");
      expect(await answer.locator("a[href^='javascript']").count()).toBe(0);
      expect(await answer.innerText()).toContain("a bad one");
      expect(await answer.locator("img, script").count()).toBe(0);
      expect(await answer.innerText()).toContain("<script>window.injected = 2</script>");
      expect(await page.evaluate("window.injected")).toBeUndefined();

      // The page itself does not scroll: the conversation does, and it shows its end above the composer.
      expect(await page.evaluate("document.scrollingElement.scrollHeight <= window.innerHeight")).toBe(true);
      await eventually(() => inViewport(page.getByText("Line 60 of a long answer."))).toBe(true);
      expect(await inViewport(composer)).toBe(true);
      expect(await inViewport(page.getByRole("button", { name: "Send" }))).toBe(true);
      await page.locator("#scroller").evaluate((scroller) => scroller.scrollTo(0, 0));
      expect(await inViewport(composer)).toBe(true);
      await screenshot("playground-markdown");
      expect(pageProblems).toEqual([]);
    });

    it("edits a message into a new branch answered from what came before it, and flips ‹ n/m › between the branches", async () => {
      bed.model.script({ text: "One." }, { text: "Two." }, { text: "Two, edited." });
      await openPlayground();
      await sendMessage("Say one");
      await eventually(() => page.locator("#messages li.assistant").textContent()).toContain("One.");
      await sendMessage("Say two");
      await eventually(() => page.locator("#messages li.assistant").count()).toBe(2);

      const second = page.locator("#messages li.user").nth(1);
      await eventually(() => second.getByRole("button", { name: "Edit" }).isEnabled()).toBe(true);
      await second.getByRole("button", { name: "Edit" }).click();
      await page.getByRole("textbox", { name: "Edited message" }).fill("Say two, edited");
      await page.getByRole("button", { name: "Save and send" }).click();
      await eventually(() => page.locator("#messages li.assistant").allTextContents()).toEqual([
        expect.stringContaining("One."),
        expect.stringContaining("Two, edited."),
      ]);
      // The model was asked with the messages before the edited one, then the edit.
      expect(
        bed.model.requests
          .at(-1)!
          .messages.slice(1)
          .map((m) => m.content),
      ).toEqual(["Say one", "One.", "Say two, edited"]);
      await eventually(() => page.getByLabel("Message version 2 of 2").textContent()).toBe("2/2");
      await screenshot("playground-edited");

      // The old branch is kept: ‹ switches the thread back to it, › to the edit again.
      await page.getByRole("button", { name: "Previous message version" }).click();
      await eventually(() => page.locator("#messages li.user").allInnerTexts()).toEqual([
        expect.stringContaining("Say one"),
        expect.stringContaining("Say two"),
      ]);
      await eventually(() => page.locator("#messages li.assistant").nth(1).textContent()).toContain("Two.");
      expect(await page.getByLabel("Message version 1 of 2").textContent()).toBe("1/2");
      await page.getByRole("button", { name: "Next message version" }).click();
      await eventually(() => page.locator("#messages li.assistant").nth(1).textContent()).toContain("Two, edited.");
      // The thread's own path changed, not only the view: a reload shows the edit.
      await page.reload();
      await eventually(() => page.locator("#messages li.user").nth(1).innerText()).toContain("Say two, edited");
      expect(pageProblems).toEqual([]);
    });

    it("a turn that ends before its send's response arrives: the message shows once, answered, and the page is ready", async () => {
      bed.model.script({ text: "Quick." }, { text: "Quick, edited." });
      await openPlayground();
      const answers = page.locator("#messages li.assistant");
      const storedAnswers = answers.getByRole("button", { name: "Good answer" });
      // The send's (then the edit's) response is held until the page shows the answer its run stored.
      let stored = 0;
      await page.route(/\/api\/chat$|\/edit$/, async (route) => {
        const response = await route.fetch();
        stored += 1;
        await expect.poll(() => storedAnswers.count(), { timeout: PATIENCE_MS }).toBe(1);
        await expect
          .poll(() => answers.last().textContent(), { timeout: PATIENCE_MS })
          .toContain(stored === 1 ? "Quick." : "Quick, edited.");
        await route.fulfill({ response });
      });
      const user = page.locator("#messages li.user");
      const ready = async () => ({
        users: await user.count(),
        edit: await user.first().getByRole("button", { name: "Edit" }).isEnabled(),
        stop: await page.getByRole("button", { name: "Stop" }).isEnabled(),
      });

      await sendMessage("Say quick");
      // The held response reached the page (before it, nothing is in flight yet under load).
      await eventually(() => stored).toBe(1);
      await eventually(() => inFlight.size).toBe(0);
      await eventually(ready).toEqual({ users: 1, edit: true, stop: false });

      await user.first().getByRole("button", { name: "Edit" }).click();
      await page.getByRole("textbox", { name: "Edited message" }).fill("Say quick, edited");
      await page.getByRole("button", { name: "Save and send" }).click();
      await eventually(() => stored).toBe(2);
      await eventually(() => inFlight.size).toBe(0);
      await eventually(ready).toEqual({ users: 1, edit: true, stop: false });
      expect(await user.first().innerText()).toContain("Say quick, edited");
      expect(await page.getByLabel("Message version 2 of 2").textContent()).toBe("2/2");
      expect(await answers.allTextContents()).toEqual([expect.stringContaining("Quick, edited.")]);
      expect(pageProblems).toEqual([]);
    });

    it("renames the open thread and deletes it (after a confirmation)", async () => {
      bed.model.script({ text: "Hello." });
      await openPlayground();
      await sendMessage("Hi");
      await eventually(() => page.locator("#messages li.assistant").count()).toBe(1);
      const threadId = app.runs.at(-1)!.event.data.threadId as string;
      const headers = { "X-Threadline-User": "user-1" };

      await page.getByRole("button", { name: "Rename" }).click();
      const title = page.getByRole("textbox", { name: "New title" });
      await title.fill("Greetings");
      await title.press("Enter");
      await eventually(() => page.locator("#thread-title").textContent()).toBe("Greetings");
      expect(await page.getByRole("link", { name: /^Greetings/ }).count()).toBe(1);
      expect(await (await fetch(`${app.url}/api/threads/${threadId}`, { headers })).json()).toMatchObject({
        title: "Greetings",
        titleSource: "user",
      });

      await page.getByRole("button", { name: "Delete", exact: true }).click();
      await page.getByRole("button", { name: "Keep it" }).click();
      expect(await page.locator("#thread-title").textContent()).toBe("Greetings");
      await page.getByRole("button", { name: "Delete", exact: true }).click();
      await screenshot("playground-delete");
      await page.getByRole("button", { name: "Delete it" }).click();
      await eventually(() => page.locator("#thread-title").textContent()).toBe("New conversation");
      expect(page.url()).toBe(`${app.url}/`);
      await eventually(() => page.getByRole("link", { name: /^Greetings/ }).count()).toBe(0);
      expect((await fetch(`${app.url}/api/threads/${threadId}`, { headers })).status).toBe(404);
      expect(await page.evaluate(`sessionStorage.getItem("threadline.stream.${threadId}")`)).toBeNull();
      expect(pageProblems).toEqual([]);
    });

    it("a thread deleted elsewhere and written again under its id: the page follows the new log from its start, while open and after a reload", async () => {
      // A long first turn: the old log's last id lies beyond every id the rewritten thread reaches below.
      const chunks = ["One ", "two ", "three ", "four ", "five ", "six ", "seven."];
      bed.model.script({ text: chunks.join(""), stream: { chunks, pauseMs: 100 } });
      await openPlayground();
      await sendMessage("Count to seven");
      await eventually(() => page.locator("#messages li.assistant").textContent()).toContain(
        "One two three four five six seven.",
      );
      const threadId = app.runs.at(-1)!.event.data.threadId as string;
      const staleId = await lastEventId(threadId);
      const user1 = { "X-Threadline-User": "user-1", "content-type": "application/json" };

      // Another tab deletes the thread and, once its id may be used again, writes to it under the same id.
      const rewrite = async (content: string, answer: string) => {
        expect(
          (await fetch(`${app.url}/api/threads/${threadId}`, { method: "DELETE", headers: user1, body: "{}" })).status,
        ).toBe(200);
        // The tombstone expires (THREAD_TOMBSTONE_DAYS, pruned by thread-retention): the id is free again.
        await bed.db.pool.query("DELETE FROM thread_tombstones WHERE thread_id = $1", [threadId]);
        bed.model.script({ text: answer });
        const sent = await fetch(`${app.url}/api/chat`, {
          method: "POST",
          headers: user1,
          body: JSON.stringify({ threadId, messageId: crypto.randomUUID(), content }),
        });
        expect(sent.status).toBe(202);
        expect((await app.runs.at(-1)!.execution).error).toBeUndefined();
        expect(await lastEventId(threadId)).toBeLessThan(staleId);
      };
      await rewrite("Written elsewhere", "Seen elsewhere.");

      // This tab sends into it: it notices the new log, reads it from the start, and shows the answer.
      bed.model.script({ text: "Still here." });
      await sendMessage("Are you there?");
      await eventually(() => page.locator("#messages li.assistant").allTextContents()).toEqual([
        expect.stringContaining("Seen elsewhere."),
        expect.stringContaining("Still here."),
      ]);
      expect(await page.locator("#messages li.user .text").allTextContents()).toEqual([
        "Written elsewhere",
        "Are you there?",
      ]);
      expect(await page.locator("#activity").textContent()).toBe("");
      expect(await page.getByRole("button", { name: "Stop" }).isDisabled()).toBe(true);

      // Again, then a reload: the tab's saved position belongs to the old log and is not resumed from.
      const before = await lastEventId(threadId);
      await rewrite("Written once more", "Seen once more.");
      expect(before).toBeGreaterThan(await lastEventId(threadId));
      const requestsBefore = resumedFrom.length;
      await page.reload();
      await eventually(() => page.locator("#messages li.user .text").allTextContents()).toEqual(["Written once more"]);
      // Followed from the start of the new log (no Last-Event-ID), never from the stale position.
      await eventually(() => resumedFrom.length).toBeGreaterThan(requestsBefore);
      expect(resumedFrom.slice(requestsBefore)).toEqual(resumedFrom.slice(requestsBefore).map(() => undefined));
      bed.model.script({ text: "Back again." });
      await sendMessage("And now?");
      await eventually(() => page.locator("#messages li.assistant").allTextContents()).toEqual([
        expect.stringContaining("Seen once more."),
        expect.stringContaining("Back again."),
      ]);
      expect(await page.locator("#activity").textContent()).toBe("");
      expect(pageProblems).toEqual([]);
    });

    it("a thread deleted elsewhere: a reload says so and forgets the tab's position; a message sent then starts a new conversation and is answered", async () => {
      bed.model.script({ text: "First answer." });
      await openPlayground();
      await sendMessage("Hello");
      await eventually(() => page.locator("#messages li.assistant").count()).toBe(1);
      const threadId = app.runs.at(-1)!.event.data.threadId as string;
      const saved = `sessionStorage.getItem("threadline.stream.${threadId}")`;
      expect(await page.evaluate(saved)).not.toBeNull();

      expect(
        (
          await fetch(`${app.url}/api/threads/${threadId}`, {
            method: "DELETE",
            headers: { "X-Threadline-User": "user-1", "content-type": "application/json" },
            body: "{}",
          })
        ).status,
      ).toBe(200);
      await page.reload();
      await eventually(() => page.getByRole("status").textContent()).toMatch(
        /^This thread no longer exists: it was deleted/,
      );
      expect(await page.evaluate(saved)).toBeNull();
      expect(await page.locator("#messages li").count()).toBe(0);

      bed.model.script({ text: "Started again." });
      await sendMessage("Anyone?");
      await eventually(() => page.locator("#messages li.assistant").textContent()).toContain("Started again.");
      expect(await page.locator("#messages li.user .text").allTextContents()).toEqual(["Anyone?"]);
      // The deleted id stays refused (its tombstone): the message went to a new thread, under a new link.
      expect(page.url()).toMatch(new RegExp(`^${app.url}/#/threads/[0-9a-f-]{36}$`));
      expect(page.url()).not.toContain(threadId);
      expect(await page.locator("#status").textContent()).toBe("");
      // The thread was gone when the page asked for it and when its stream was refused: the browser logs both 404s.
      expect(
        pageProblems.every((problem) => /status of 404 \(Not Found\)/.test(problem)),
        JSON.stringify(pageProblems),
      ).toBe(true);
    });

    it("with no model configured, says how to configure one before the first send, and the turn's failure says it again", async () => {
      const unconfigured = await startLiveApp(bed.db.pool, bed.model, {
        model: { configured: false, reason: MODEL_NOT_CONFIGURED },
      });
      try {
        await openPlayground({ url: unconfigured.url });
        await eventually(() => page.locator("#model-info").textContent()).toBe(
          "No model configured · inference: stream",
        );
        const setup = page.locator("#setup");
        expect(await setup.isVisible()).toBe(true);
        expect(await setup.locator("strong").textContent()).toBe(MODEL_NOT_CONFIGURED);
        const steps = await setup.locator("li").allTextContents();
        expect(steps[0]).toMatch(/OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY .*restart/);
        expect(steps[1]).toMatch(/Ollama.*ollama pull .*OLLAMA_BASE_URL/);
        await screenshot("playground-no-model");
        await sendMessage("Hello?");
        await eventually(() => page.locator("#messages .turn-state.failed").textContent()).toBe(
          `failed: ${MODEL_NOT_CONFIGURED}`,
        );
        expect(bed.model.requests).toEqual([]);
        expect(pageProblems).toEqual([]);
      } finally {
        await page.close();
        await unconfigured.close();
      }
    });

    it("is served with its Content Security Policy, and shows HTML in a title, a message, an answer and a search hit as text", async () => {
      const page0 = await fetch(app.url);
      expect(page0.headers.get("content-security-policy")).toMatch(/script-src 'self'/);
      const html = `<img src=x onerror="window.injected=1"><b>bold</b>`;
      bed.model.script({ text: `Answer ${html}` });
      const created = await fetch(`${app.url}/api/threads`, {
        method: "POST",
        headers: { "X-Threadline-User": "user-1", "content-type": "application/json" },
        body: JSON.stringify({ title: `Title ${html}` }),
      });
      const { id: threadId } = (await created.json()) as { id: string };
      await openPlayground();
      await page.getByRole("link", { name: /^Title </ }).click();
      await eventually(() => page.locator("#thread-title").textContent()).toBe(`Title ${html}`);
      await sendMessage(`Question ${html}`);
      await eventually(() => page.locator("#messages li.assistant").textContent()).toContain(`Answer ${html}`);
      expect(await page.locator("#messages li.user").textContent()).toContain(`Question ${html}`);
      await page.getByRole("searchbox", { name: "Search messages" }).fill("bold");
      await page.getByRole("button", { name: "Search", exact: true }).click();
      await eventually(() => page.locator("#search-results li").count()).toBe(2);
      expect(await page.locator("#search-results").textContent()).toContain("<img");
      expect(await page.locator("#search-results mark").first().textContent()).toBe("bold");
      // Nothing of it became markup: no image, no bold element, no script ran.
      expect(await page.locator("#workspace img, #workspace b").count()).toBe(0);
      expect(await page.evaluate("window.injected")).toBeUndefined();
      expect(page.url()).toBe(`${app.url}/#/threads/${threadId}`);
      expect(pageProblems).toEqual([]);
    });

    it("signs in with a pasted API key (a refused one leaves the page signed out, saying why) and signs out", async () => {
      const { key } = await createApiKey(bed.db.pool, { userId: "key-holder", name: "playground" });
      await bed.db.pool.query(
        "INSERT INTO threads (id, user_id, title, title_source) VALUES ($1, 'key-holder', 'Only for the key holder', 'user')",
        [crypto.randomUUID()],
      );
      await openPlayground({ signIn: false });
      await page.getByLabel("or a token").fill("tl_not-a-real-key");
      await page.getByRole("button", { name: "Sign in" }).click();
      await eventually(() => page.getByRole("status").textContent()).toMatch(
        /^Sign in again: .*API key is unknown or revoked/,
      );
      expect(await page.getByRole("button", { name: "Sign in" }).isVisible()).toBe(true);

      await page.getByLabel("or a token").fill(key);
      await page.getByRole("button", { name: "Sign in" }).click();
      await eventually(() => page.getByRole("link", { name: /Only for the key holder/ }).isVisible()).toBe(true);
      expect(await page.getByRole("link").count()).toBe(1);
      await page.getByRole("button", { name: "Sign out" }).click();
      expect(await page.getByRole("button", { name: "Sign in" }).isVisible()).toBe(true);
      expect(await page.evaluate("Object.keys(sessionStorage)")).toEqual([]);
      // The browser logs the refused request itself.
      expect(pageProblems).toEqual([expect.stringMatching(/status of 401 \(Unauthorized\)/)]);
    });

    it("signs in with a user name in any script (AUTH=dev): the server's user is the name as typed", async () => {
      const name = "José 山田";
      await bed.db.pool.query(
        "INSERT INTO threads (id, user_id, title, title_source) VALUES ($1, $2, 'Only for José', 'user')",
        [crypto.randomUUID(), name],
      );
      await openPlayground({ signIn: false });
      await page.getByLabel("User name").fill(name);
      await page.getByRole("button", { name: "Sign in" }).click();
      await eventually(() => page.getByText(`Signed in as ${name}`).isVisible()).toBe(true);
      await eventually(() => page.getByRole("link", { name: /Only for José/ }).isVisible()).toBe(true);
      expect(await page.getByRole("link").count()).toBe(1);
      expect(pageProblems).toEqual([]);
    });

    it("folds deltas exactly as src/stream/deltas.ts does (one module for both, run in the browser)", async () => {
      const row = fc.record({
        event: fc.constantFrom("text.delta", "text.delta", "text.delta", "part.created"),
        data: fc.record({
          runId: fc.constantFrom("run-1", "run-2"),
          stepId: fc.constantFrom("assistant", "reviewer"),
          attempt: fc.integer({ min: 0, max: 2 }),
          delta: fc.string(),
        }),
      });
      await openPlayground({ signIn: false });
      const logs = fc
        .sample(fc.array(row, { maxLength: 12 }), { numRuns: 300, seed: 11 })
        // part.created rows with a delta's data, off the vocabulary on purpose: both folds skip them.
        .map((rows) => rows.map((r, i) => ({ id: i + 1, ...r }) as ThreadEvent));
      // A source string: vitest would rewrite a function's import() into its own loader.
      const folded = await page.evaluate(
        `import("/playground/deltas.js").then(({ streamedTexts }) => ${JSON.stringify(logs)}.map((events) => streamedTexts(events)))`,
      );
      expect(folded).toEqual(logs.map((events) => streamedTexts(events)));
    });
  });
}

/**
 * Cuts the page's connections once it has no request under way but its event stream (a cut API
 * call would be a failure of its own), and waits for the stream to reconnect after event `lastId`.
 */
async function dropAndExpectResumeAfter(lastId: number) {
  await eventually(() => inFlight.size).toBe(0);
  const requests = resumedFrom.length;
  app.dropConnections();
  await eventually(() => resumedFrom.length).toBe(requests + 1);
  expect(resumedFrom.at(-1)).toBe(String(lastId));
}

/** Types a message in the composer and sends it. */
async function sendMessage(text: string) {
  await page.getByRole("textbox", { name: "Message", exact: true }).fill(text);
  await page.getByRole("button", { name: "Send" }).click();
}

/** Keeps a screenshot of the page as a test artifact (test-artifacts/<name>.png). */
const screenshot = (name: string) => saveScreenshot(page, name);

/** Whether the element lies wholly inside the window, as the reader sees it now. */
async function inViewport(locator: ReturnType<Page["locator"]>) {
  const box = await locator.boundingBox();
  const viewport = page.viewportSize()!;
  return (
    box !== null &&
    box.y >= 0 &&
    box.x >= 0 &&
    box.y + box.height <= viewport.height &&
    box.x + box.width <= viewport.width
  );
}

const liveTexts = () => liveTextsOf(page);

/** The arriving answer's text as shown (rendered Markdown: whitespace at its ends is not shown). */
const liveAnswer = async () =>
  (await page.locator("#live-answer").isVisible())
    ? ((await page.locator("#live-answer").textContent()) ?? "").trim()
    : null;

async function lastEventId(threadId: string) {
  const { rows } = await bed.db.pool.query<{ id: string }>(
    "SELECT max(id) AS id FROM thread_events WHERE thread_id = $1",
    [threadId],
  );
  return Number(rows[0]!.id);
}
