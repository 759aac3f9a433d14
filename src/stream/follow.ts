import type { SSEStreamingApi } from "hono/streaming";
import type { EventNotifier } from "./notifier.js";

/** A subscription to a thread's new events, taken before the stream's first read. */
export type ThreadFollower = {
  /**
   * Calls `read` at once and whenever the thread may have new events, until it answers true (the
   * stream is complete), the client goes away or the notifier closes; writes a heartbeat comment
   * when nothing happened for `heartbeatMs`. Unsubscribes when it returns.
   */
  follow: (stream: SSEStreamingApi, heartbeatMs: number, read: () => Promise<boolean>) => Promise<void>;
  /** Unsubscribes without following (the request was refused after subscribing). */
  stop: () => void;
};

/**
 * Subscribes to the thread's events through the process's shared LISTEN connection. Subscribing
 * before reading anything means whatever commits after the subscription wakes the follower, so a
 * stream that reads after each wake-up misses nothing.
 */
export async function followThread(events: EventNotifier, threadId: string): Promise<ThreadFollower> {
  let woken = true;
  let wakeUp: () => void = () => undefined;
  const unsubscribe = await events.subscribe(threadId, () => {
    woken = true;
    wakeUp();
  });
  return {
    stop: unsubscribe,
    async follow(stream, heartbeatMs, read) {
      stream.onAbort(() => wakeUp());
      try {
        while (!stream.aborted && !events.closed) {
          if (woken) {
            woken = false;
            if (await read()) return;
            continue;
          }
          const heartbeat = await new Promise<boolean>((resolve) => {
            const timer = setTimeout(() => resolve(true), heartbeatMs);
            wakeUp = () => {
              clearTimeout(timer);
              resolve(false);
            };
          });
          wakeUp = () => undefined;
          if (heartbeat && !stream.aborted) await stream.write(": heartbeat\n\n");
        }
      } finally {
        unsubscribe();
      }
    },
  };
}
