import type pg from "pg";
import { databaseNow, readEventsToRelay, threadsWrittenSince, type RelayedEvent } from "../history/event-relay.js";
import { THREAD_DELETED } from "../history/thread-log.js";
import { logger } from "../platform/logger.js";
import type { EventNotifier } from "./notifier.js";
import type { AgentStreamChunk, RealtimePublisher } from "./realtime-publisher.js";

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
  /** Threads waiting for a worker now (at most RELAY_MAX_PENDING). */
  readonly queued: number;
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

/** What a thread's last owner is sent when it is deleted (or its id taken by a new thread): use-agent's chunk shape. */
const threadDeletedChunk = (threadId: string, lastId: number): AgentStreamChunk => ({
  event: THREAD_DELETED,
  data: { threadId },
  timestamp: Date.now(),
  sequenceNumber: lastId + 1,
  id: `${threadId}:deleted`,
});

/**
 * A thread the relay follows: the last id published, the time its unpublished rows were written
 * from, whether it woke since the last sweep, and the owner and incarnation its rows were read as.
 */
type Followed = {
  lastId: number;
  since: Date;
  woken: boolean;
  ownerId?: string;
  incarnation?: string;
  missed?: boolean;
};

/** Threads relayed at the same time (each one in order, by one worker at a time). */
const RELAY_CONCURRENCY = 4;

/**
 * Threads waiting to be relayed at most. A thread waits once however often it wakes; past the
 * bound a wake-up is not queued but marked on the held thread, which is queued once the queue has
 * drained, so nothing is lost and memory stays bounded (by the threads held).
 */
const RELAY_MAX_PENDING = 10_000;

/**
 * Follows every thread's event log (through the shared notifier) and publishes each event written
 * from the relay's start to its thread owner's channel, topic agent_stream, once and in order.
 * Wake-ups go through a bounded queue of threads (RELAY_MAX_PENDING): a thread is queued once,
 * however often it wakes, and relayed by one of RELAY_CONCURRENCY workers at a time, reading after
 * the last event it published — so a thread's events stay in order and a busy thread delays the
 * others by one read at most. A failed publish is logged and the same events are tried again on
 * the thread's next wake-up (Inngest realtime keeps no replay; the SSE routes are the durable
 * stream). One relay per deployment: each running relay publishes every event. A re-established
 * LISTEN connection (notifications lost meanwhile) wakes every held thread and every thread written
 * to since the relay forgot threads last.
 *
 * Each read is the thread's owner's: rows go to the channel of the thread that holds them, and a
 * thread that is gone (deleted), or whose id a new thread took, sends its last owner one final
 * `thread.deleted` chunk; a new thread under the id is followed from its first row.
 *
 * Only recently active threads are held: a sweep forgets the threads that did not wake since the
 * previous sweep (a thread queued or being relayed counts as awake). Everything such a thread
 * published was read before that previous sweep started, so when it wakes again its rows are read
 * from that time on (by the database's clock), which holds its new rows and none it published (a
 * row whose transaction began before that time and committed after it, more than a sweep interval
 * later, would be missed).
 */
export async function startRealtimeRelay({
  db,
  events,
  publisher,
  concurrency = RELAY_CONCURRENCY,
  maxPending = RELAY_MAX_PENDING,
}: {
  db: pg.Pool;
  events: EventNotifier;
  publisher: RealtimePublisher;
  concurrency?: number;
  maxPending?: number;
}): Promise<RealtimeRelay> {
  const started = await databaseNow(db);
  const followed = new Map<string, Followed>();
  /** Where a thread the relay does not hold starts: when the flags the last sweep judged by were reset. */
  let forgottenBefore = started;
  let lastSweep = started;
  let closed = false;
  /** Threads waiting for a worker, in wake-up order; a thread is in at most one of pending, active. */
  const pending = new Set<string>();
  const active = new Set<string>();
  /** Threads woken while a worker relays them: queued again when it is done. */
  const again = new Set<string>();
  /** A wake-up was not queued (the queue was full): the threads it missed (marked `missed`) are queued once it drains. */
  let overflowed = false;
  let idleWaiters: (() => void)[] = [];
  /** Reads of the threads written while the LISTEN connection was down, under way. */
  let catchingUp = 0;

  const relayThread = async (threadId: string) => {
    const thread = followed.get(threadId);
    if (!thread) return;
    for (;;) {
      const read = await readEventsToRelay(db, {
        threadId,
        afterId: thread.lastId,
        since: thread.since,
        limit: RELAY_PAGE_SIZE,
      });
      const current = read.thread;
      if (!current || (thread.incarnation !== undefined && current.incarnation !== thread.incarnation)) {
        if (thread.ownerId !== undefined && !closed)
          await publisher.publish(thread.ownerId, threadDeletedChunk(threadId, thread.lastId));
        if (!current) {
          followed.delete(threadId);
          return;
        }
        // A new thread under the id: its rows are read from its first one, for its owner.
        Object.assign(thread, { lastId: 0, ownerId: current.ownerId, incarnation: current.incarnation });
        continue;
      }
      thread.ownerId = current.ownerId;
      thread.incarnation = current.incarnation;
      for (const row of read.events) {
        if (closed) return;
        await publisher.publish(current.ownerId, toAgentStreamChunk(threadId, row));
        thread.lastId = row.id;
      }
      if (read.events.length < RELAY_PAGE_SIZE) return;
    }
  };

  const settleIdle = () => {
    if (pending.size > 0 || active.size > 0 || catchingUp > 0) return;
    const waiters = idleWaiters;
    idleWaiters = [];
    for (const resolve of waiters) resolve();
  };

  const pump = () => {
    while (!closed && active.size < concurrency && pending.size > 0) {
      const threadId = pending.values().next().value as string;
      pending.delete(threadId);
      active.add(threadId);
      void relayThread(threadId)
        .catch((error: unknown) =>
          logger.warn(
            { err: error, threadId },
            "realtime relay: publishing failed; retried on the thread's next event",
          ),
        )
        .finally(() => {
          active.delete(threadId);
          if (again.delete(threadId)) schedule(threadId);
          if (overflowed && pending.size === 0) {
            overflowed = false;
            for (const [held, thread] of followed) if (thread.missed) schedule(held);
          }
          pump();
          settleIdle();
        });
    }
    settleIdle();
  };

  const schedule = (threadId: string) => {
    if (closed) return;
    if (active.has(threadId)) {
      again.add(threadId);
      return;
    }
    if (pending.has(threadId)) return;
    const thread = followed.get(threadId);
    if (pending.size >= maxPending) {
      if (thread) thread.missed = true;
      overflowed = true;
      return;
    }
    if (thread) thread.missed = false;
    pending.add(threadId);
  };

  const wake = (threadId: string | null) => {
    if (closed) return;
    if (threadId !== null) {
      // Held from now on, so a reconnect (null) also retries a thread whose first publish failed.
      const thread = followed.get(threadId);
      if (thread) thread.woken = true;
      else followed.set(threadId, { lastId: 0, since: forgottenBefore, woken: true });
      schedule(threadId);
    } else {
      for (const held of followed.keys()) schedule(held);
      // Any thread may have rows whose notification was lost, those it does not hold too: each
      // thread written to since it started (or forgot threads) is followed from then, as on a wake-up.
      catchingUp += 1;
      void threadsWrittenSince(db, forgottenBefore)
        .then((threadIds) => {
          for (const written of threadIds) if (!followed.has(written)) wake(written);
        })
        .catch((error: unknown) =>
          logger.warn(
            { err: error },
            "realtime relay: threads written while not listening unread; relayed on their next event",
          ),
        )
        .finally(() => {
          catchingUp -= 1;
          settleIdle();
        });
    }
    pump();
  };

  const busy = (threadId: string) => pending.has(threadId) || active.has(threadId) || again.has(threadId);

  const sweep = async () => {
    const quiet = [...followed].filter(([threadId, thread]) => !thread.woken && !busy(threadId));
    for (const [threadId, thread] of followed) if (!busy(threadId)) thread.woken = false;
    // Read after the flags were reset: a thread that wakes from here on is kept by the next sweep.
    const now = await databaseNow(db).catch((error: unknown) => {
      logger.warn({ err: error }, "realtime relay: sweep skipped (database unreachable)");
    });
    if (!now) {
      for (const thread of followed.values()) thread.woken = true;
      return;
    }
    for (const [threadId, thread] of quiet) if (!thread.woken && !busy(threadId)) followed.delete(threadId);
    forgottenBefore = lastSweep;
    lastSweep = now;
  };

  const idle = () =>
    pending.size === 0 && active.size === 0 && catchingUp === 0
      ? Promise.resolve()
      : new Promise<void>((resolve) => idleWaiters.push(resolve));

  const unsubscribe = await events.subscribeAll(wake);
  const timer = setInterval(() => void sweep(), RELAY_SWEEP_MS);
  timer.unref();
  return {
    idle,
    sweep,
    get threads() {
      return followed.size;
    },
    get queued() {
      return pending.size;
    },
    async close() {
      unsubscribe();
      clearInterval(timer);
      // What is being published ends first; nothing queued starts any more.
      const draining =
        active.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => idleWaiters.push(resolve));
      closed = true;
      pending.clear();
      again.clear();
      settleIdle();
      await draining;
    },
  };
}
