import { ApiError } from "./api.js";

/** Waits between reconnections: doubled after each failed attempt, up to the maximum. */
const RETRY_FIRST_MS = 500;
const RETRY_MAX_MS = 10_000;

/**
 * Follows a thread's event log (GET /api/threads/:id/events, Server-Sent Events) with fetch and
 * a streaming reader, since EventSource cannot send an Authorization header. Events reach
 * `onEvents` in batches (those one network read completed), each `{id, event, data}`. A stream
 * that ends or fails is resumed with Last-Event-ID = the last id received, so nothing is missed
 * or repeated (`onInterrupted` hears of each drop, `onConnected` of each connection); a refusal
 * (401, 404: the stream cannot succeed) ends following and reaches `onRefused`.
 */
export function followEvents({ threadId, headers, after, onConnected, onEvents, onInterrupted, onRefused }) {
  const controller = new AbortController();
  const url = `/api/threads/${encodeURIComponent(threadId)}/events`;
  let lastId = after;

  async function follow() {
    let wait = RETRY_FIRST_MS;
    while (!controller.signal.aborted) {
      try {
        const resume = lastId > 0 ? { "Last-Event-ID": String(lastId) } : {};
        const response = await fetch(url, { headers: { ...headers, ...resume }, signal: controller.signal });
        if (response.status >= 400 && response.status < 500) {
          const answer = await response.json().catch(() => ({}));
          onRefused(new ApiError(response.status, answer.error ?? `the event stream answered HTTP ${response.status}`));
          return;
        }
        if (!response.ok || !response.body) throw new Error(`the event stream answered HTTP ${response.status}`);
        wait = RETRY_FIRST_MS;
        onConnected();
        for await (const batch of eventBatches(response.body)) {
          lastId = batch[batch.length - 1].id;
          onEvents(batch);
        }
      } catch {
        // Told below, like a stream the server ended.
      }
      if (controller.signal.aborted) return;
      // The server closed the stream (a restart, a proxy) or the network dropped: resume shortly.
      onInterrupted();
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, RETRY_MAX_MS);
    }
  }

  follow();
  return { stop: () => controller.abort() };
}

/** The events of a text/event-stream body, one array per read that completed at least one. */
async function* eventBatches(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffer += value.replaceAll("\r\n", "\n");
      const frames = buffer.split("\n\n");
      buffer = frames.pop();
      const batch = frames.map(parseFrame).filter((event) => event !== null);
      if (batch.length > 0) yield batch;
    }
  } finally {
    reader.releaseLock();
  }
}

/** One frame's fields (`id`, `event`, `data` lines); null for a comment (a heartbeat). */
function parseFrame(frame) {
  const fields = { data: [] };
  for (const line of frame.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (name === "data") fields.data.push(value);
    else fields[name] = value;
  }
  if (fields.id === undefined || fields.event === undefined) return null;
  return { id: Number(fields.id), event: fields.event, data: JSON.parse(fields.data.join("\n")) };
}
