import type pg from "pg";
import { databaseNow, readEventsToRelay, type RelayedEvent } from "../history/event-relay.js";
import { logger } from "../logger.js";
import type { EventNotifier } from "../stream/notifier.js";
import type { AgentStreamChunk, RealtimePublisher } from "./publisher.js";

/** Events one read relays at most; a longer backlog is read page by page. */
const RELAY_PAGE_SIZE = 500;

export type RealtimeRelay = {
  /** Resolves once everything the relay was woken for so far is published (or failed and logged). */
  idle: () => Promise<void>;
  close: () => Promise<void>;
};

/** A log row as use-agent reads it: the row id orders the thread's chunks, and data names the thread. */
const toAgentStreamChunk = (threadId: string, event: RelayedEvent): AgentStreamChunk => ({
  event: event.event,
  data: { ...event.data, threadId },
  timestamp: event.createdAt.getTime(),
  sequenceNumber: event.id,
  id: `${threadId}:${event.id}`,
});

/**
 * Follows every thread's event log (through the shared notifier) and publishes each event written
 * from the relay's start to its thread owner's channel, topic agent_stream, once and in order: a
 * thread's events are read after the last one published, one thread at a time. A failed publish is
 * logged and the same events are tried again on the thread's next wake-up (Inngest realtime keeps no
 * replay; the SSE routes are the durable stream). One relay per deployment: each running relay
 * publishes every event.
 */
export async function startRealtimeRelay({ db, events, publisher }: { db: pg.Pool; events: EventNotifier; publisher: RealtimePublisher }): Promise<RealtimeRelay> {
  const since = await databaseNow(db);
  /** Per thread, the id of the last event published. */
  const published = new Map<string, number>();
  let queue = Promise.resolve();
  let closed = false;

  const relayThread = async (threadId: string) => {
    for (;;) {
      const rows = await readEventsToRelay(db, { threadId, afterId: published.get(threadId)!, since, limit: RELAY_PAGE_SIZE });
      for (const row of rows) {
        if (closed) return;
        await publisher.publish(row.ownerId, toAgentStreamChunk(threadId, row));
        published.set(threadId, row.id);
      }
      if (rows.length < RELAY_PAGE_SIZE) return;
    }
  };

  // One wake-up after another: a thread is never read twice at once, so nothing is published twice.
  const wake = (threadId: string | null) => {
    if (closed) return;
    // Known from now on, so a reconnect (null) also retries a thread whose first publish failed.
    if (threadId !== null && !published.has(threadId)) published.set(threadId, 0);
    const threads = threadId === null ? [...published.keys()] : [threadId];
    queue = queue.then(async () => {
      for (const thread of threads) {
        await relayThread(thread).catch((error: unknown) => logger.warn({ err: error, threadId: thread }, "realtime relay: publishing failed; retried on the thread's next event"));
      }
    });
  };
  const unsubscribe = await events.subscribeAll(wake);
  return {
    idle: () => queue,
    async close() {
      closed = true;
      unsubscribe();
      await queue;
    },
  };
}
