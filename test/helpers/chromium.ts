import { existsSync, mkdirSync } from "node:fs";
import { chromium, type Browser, type Page } from "playwright-core";
import { expect, it } from "vitest";

/** Debian's chromium (apt-get install chromium); the tests never download a browser. */
const CHROMIUM = "/usr/bin/chromium";
const ARTIFACTS = "test-artifacts";
export const hasChromium = existsSync(CHROMIUM);

/**
 * For a browser test file on a machine without chromium: a warning in the suite's output (where a
 * developer sees why the test did not run), or with REQUIRE_BROWSER=1 a failing test saying so.
 */
export function reportMissingChromium(what: string) {
  const required = process.env.REQUIRE_BROWSER === "1";
  if (!required)
    console.warn(
      `${what} skipped: ${CHROMIUM} is missing (apt-get install chromium; REQUIRE_BROWSER=1 makes this a failure)`,
    );
  it.runIf(required)(what, () => {
    expect.fail(`${CHROMIUM} is missing and REQUIRE_BROWSER=1: install it with apt-get install -y chromium`);
  });
}

export const launchChromium = (): Promise<Browser> =>
  chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });

/**
 * Records every text the playground's arriving answer (#live-answer) shows, in order, from each
 * document's first render on: read it with liveTexts(page). Call before the page is opened.
 */
export const recordLiveTexts = (page: Page) =>
  page.addInitScript(() => {
    const shown: string[] = [];
    Object.assign(window, { liveTexts: shown });
    new MutationObserver(() => {
      const live = document.getElementById("live-answer");
      const text = live && !live.hidden ? (live.textContent ?? "").trim() : "";
      if (text !== "" && text !== shown[shown.length - 1]) shown.push(text);
    }).observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
  });

export const liveTexts = async (page: Page) => (await page.evaluate("window.liveTexts")) as string[];

/** Keeps a screenshot of the page as a test artifact (test-artifacts/<name>.png). */
export async function saveScreenshot(page: Page, name: string, fullPage = false) {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: `${ARTIFACTS}/${name}.png`, fullPage });
}
