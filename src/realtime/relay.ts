import type pg from "pg";
import { databaseNow, readEventsToRelay, type RelayedEvent } from "../history/event-relay.js";
import { logger } from "../logger.js";
import type { EventNotifier } from "../stream/notifier.js";
import type { AgentStreamChunk, RealtimePublisher } from "./publisher.js";

/** Events one read relays at most; a longer backlog is read page by page. */
const RELAY_PAGE_SIZE = 500;

/** How often the relay forgets the threads that were quiet since the previous sweep. */
const RELAY_SWEEP_MS = 10 * 60_000;

export type RealtimeRelay = {
  /** Resolves once everything the relay was woken for so far is published (or failed and logged). */
  idle: () => Promise<void>;
  /**
   * Forgets the threads with no new event since the previous sweep (the relay runs one every
   * RELAY_SWEEP_MS): memory holds the recently active threads only, however many threads there are.
   */
  sweep: () => Promise<void>;
  /** Threads whose last published event the relay holds now. */
  readonly threads: number;
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

/** A thread the relay follows: the last id published, the time its unpublished rows were written from, and whether it woke since the last sweep. */
type Followed = { lastId: number; since: Date; woken: boolean };

/**
 * Follows every thread's event log (through the shared notifier) and publishes each event written
 * from the relay's start to its thread owner's channel, topic agent_stream, once and in order: a
 * thread's events are read after the last one published, one thread at a time. A failed publish is
 * logged and the same events are tried again on the thread's next wake-up (Inngest realtime keeps no
 * replay; the SSE routes are the durable stream). One relay per deployment: each running relay
 * publishes every event.
 *
 * Only recently active threads are held: a sweep forgets the threads that did not wake since the
 * previous sweep. Everything such a thread published was read before that previous sweep started,
 * so when it wakes again its rows are read from that time on (by the database's clock), which holds
 * its new rows and none it published (a row whose transaction began before that time and committed
 * after it, more than a sweep interval later, would be missed).
 */
export async function startRealtimeRelay({ db, events, publisher }: { db: pg.Pool; events: EventNotifier; publisher: RealtimePublisher }): Promise<RealtimeRelay> {
  const started = await databaseNow(db);
  const followed = new Map<string, Followed>();
  /** Where a thread the relay does not hold starts: when the flags the last sweep judged by were reset. */
  let forgottenBefore = started;
  let lastSweep = started;
  let queue = Promise.resolve();
  let closed = false;

  const relayThread = async (threadId: string) => {
    const thread = followed.get(threadId);
    if (!thread) return;
    for (;;) {
      const rows = await readEventsToRelay(db, { threadId, afterId: thread.lastId, since: thread.since, limit: RELAY_PAGE_SIZE });
      for (const row of rows) {
        if (closed) return;
        await publisher.publish(row.ownerId, toAgentStreamChunk(threadId, row));
        thread.lastId = row.id;
      }
      if (rows.length < RELAY_PAGE_SIZE) return;
    }
  };

  // One wake-up after another: a thread is never read twice at once, so nothing is published twice.
  const enqueue = (work: () => Promise<void>) => {
    queue = queue.then(work);
    return queue;
  };

  const wake = (threadId: string | null) => {
    if (closed) return;
    if (threadId !== null) {
      // Held from now on, so a reconnect (null) also retries a thread whose first publish failed.
      const thread = followed.get(threadId);
      if (thread) thread.woken = true;
      else followed.set(threadId, { lastId: 0, since: forgottenBefore, woken: true });
    }
    const threads = threadId === null ? [...followed.keys()] : [threadId];
    void enqueue(async () => {
      for (const thread of threads) {
        await relayThread(thread).catch((error: unknown) => logger.warn({ err: error, threadId: thread }, "realtime relay: publishing failed; retried on the thread's next event"));
      }
    });
  };

  // In the queue: the reads of every wake-up before this sweep are done when it judges.
  const sweep = () =>
    enqueue(async () => {
      const quiet = [...followed].filter(([, thread]) => !thread.woken);
      for (const thread of followed.values()) thread.woken = false;
      // Read after the flags were reset: a thread that wakes from here on is kept by the next sweep.
      const now = await databaseNow(db).catch((error: unknown) => {
        logger.warn({ err: error }, "realtime relay: sweep skipped (database unreachable)");
      });
      if (!now) {
        for (const thread of followed.values()) thread.woken = true;
        return;
      }
      for (const [threadId, thread] of quiet) if (!thread.woken) followed.delete(threadId);
      forgottenBefore = lastSweep;
      lastSweep = now;
    });

  const unsubscribe = await events.subscribeAll(wake);
  const timer = setInterval(() => void sweep(), RELAY_SWEEP_MS);
  timer.unref();
  return {
    idle: () => queue,
    sweep,
    get threads() {
      return followed.size;
    },
    async close() {
      closed = true;
      clearInterval(timer);
      unsubscribe();
      await queue;
    },
  };
}
