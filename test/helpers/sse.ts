import { expect } from "vitest";
import { headersFor } from "./http.js";

export type ReceivedEvent = { id: number; event: string; data: Record<string, unknown> };

type App = { request: (path: string, init?: RequestInit) => Response | Promise<Response> };

/**
 * A Server-Sent Events client of GET /api/threads/:threadId/events, reading the app's response
 * body as a browser's EventSource would: `received` fills as events arrive, `heartbeats` counts
 * comment lines, `waitFor(n)` waits (with a deadline) until n events arrived, `close()` disconnects.
 */
export async function openEventStream(
  app: App,
  threadId: string,
  options: { userId?: string; lastEventId?: number; after?: number } = {},
) {
  const controller = new AbortController();
  const headers: Record<string, string> = { ...(await headersFor(options.userId ?? "user-1")) };
  if (options.lastEventId !== undefined) headers["last-event-id"] = String(options.lastEventId);
  const query = options.after === undefined ? "" : `?after=${options.after}`;
  const response = await app.request(`/api/threads/${threadId}/events${query}`, { headers, signal: controller.signal });
  const received: ReceivedEvent[] = [];
  const state = { heartbeats: 0, ended: false };
  const changed = new Set<() => void>();
  const reader = response.body?.getReader();
  const reading = (async () => {
    if (!reader) return;
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const fields = Object.fromEntries(
            frame
              .split("\n")
              .filter((l) => !l.startsWith(":"))
              .map((l) => [l.slice(0, l.indexOf(":")), l.slice(l.indexOf(":") + 1).trimStart()]),
          );
          if (frame.startsWith(":")) state.heartbeats += 1;
          else
            received.push({
              id: Number(fields.id),
              event: fields.event!,
              data: JSON.parse(fields.data!) as Record<string, unknown>,
            });
          for (const listener of changed) listener();
        }
      }
    } catch {
      // Aborted by close().
    }
    state.ended = true;
    for (const listener of changed) listener();
  })();

  const until = (done: () => boolean, what: string, timeoutMs = 5_000) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (!done()) return;
        clearTimeout(timer);
        changed.delete(check);
        resolve();
      };
      const timer = setTimeout(() => {
        changed.delete(check);
        reject(
          new Error(`timed out waiting for ${what}; received ${JSON.stringify(received.map((e) => [e.id, e.event]))}`),
        );
      }, timeoutMs);
      changed.add(check);
      check();
    });

  return {
    response,
    received,
    state,
    waitFor: (count: number) => until(() => received.length >= count, `${count} events`),
    waitForHeartbeat: () => until(() => state.heartbeats > 0, "a heartbeat"),
    waitForEnd: () => until(() => state.ended, "the end of the stream"),
    close: async () => {
      // A browser closing the tab: the connection goes away and the body stops being read.
      controller.abort();
      await reader?.cancel().catch(() => undefined);
      await reading;
    },
  };
}

/** The ids of received events must increase by one from `first`, each once. */
export function expectConsecutive(events: ReceivedEvent[], first: number) {
  expect(events.map((e) => e.id)).toEqual(events.map((_, i) => first + i));
}

/** A UI message stream's (useChat's) `data:` payloads, read to the end of the response. */
export const dataLines = async (response: Response) =>
  (await response.text())
    .split("\n")
    .filter((line) => line.startsWith("data: "))
    .map((line) => line.slice("data: ".length));

export type UiChunk = { type: string; [field: string]: unknown };

/** A UI message stream's chunks, read to its end: the JSON ones parsed, then "[DONE]". */
export const uiChunks = async (response: Response) =>
  (await dataLines(response)).map((data) => (data === "[DONE]" ? data : (JSON.parse(data) as UiChunk)));
