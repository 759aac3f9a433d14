import type pg from "pg";
import {
  framesAfter,
  readOwnedEventFrames,
  readThreadEventFrames,
  type EventFrames,
  type OwnedThread,
  type PageLimit,
} from "../history/events.js";
import type { EventNotifier } from "./notifier.js";

/** What a follower of a thread gets next. */
export type FeedDelivery =
  /** New rows of the thread's log as the stream sends them, in id order, each once. */
  | { frames: EventFrames }
  /** The thread is gone (deleted, or deleted and created again): nothing more comes. */
  | { deleted: true }
  /** The follower fell more than the feed's queue bound behind: it should resume from its last row. */
  | { behind: true }
  /** Reading the log failed: the follower ends and the client resumes. */
  | { failed: unknown }
  /** The process is shutting down (the notifier closed), or the follower was closed. */
  | { closed: true };

export type FeedFollower = {
  /** The next delivery, or null when nothing came for `timeoutMs` (time for a heartbeat). */
  next: (timeoutMs: number) => Promise<FeedDelivery | null>;
  /** The next delivery if there is one at once (a reconnect's first page is queued, or the follower is done), else undefined. */
  take: () => FeedDelivery | undefined;
  /** Leaves the feed (idempotent); a pending next() answers closed. */
  close: () => void;
  /**
   * Calls `listener` once the follower is told it is behind, at once (before its `behind`
   * delivery is taken): a stream blocked writing to a client that stopped reading can let it go.
   */
  whenBehind: (listener: () => void) => void;
};

export type ThreadFeeds = {
  /**
   * Follows the user's thread from after `afterId`; undefined when it is not the user's thread (or
   * none at all). Listens first, then reads whether the thread is the user's and the first page of
   * the rows after `afterId` in one statement: the follower's first delivery, so a reconnect's
   * replay costs no read of its own. Whatever commits after that read reaches the follower too.
   */
  follow: (input: { threadId: string; userId: string; afterId: number }) => Promise<FeedFollower | undefined>;
  /** Threads followed now (each one database read per wake-up, however many followers). */
  readonly feeds: number;
};

/**
 * What one read returns at most; a longer backlog is read page by page. A page is one value the
 * database builds and one write to each client: a reconnect's replay of up to FEED_MAX_QUEUED
 * rows is one read, as a plain SELECT of them is (issue 19).
 */
const FEED_PAGE: PageLimit = { rows: 5_000, bytes: 4 * 1024 * 1024 };

/** Rows a follower may have waiting unwritten before it is told it is behind (a stalled client). */
const FEED_MAX_QUEUED = 5_000;

/**
 * Characters of frames (about bytes) a follower may have waiting unwritten before it is told it
 * is behind: rows are of any size (a tool call's arguments, a whole part with EVENT_LOG_CHUNKS),
 * so the row bound alone does not bound a stalled client's memory. Four pages.
 */
const FEED_MAX_QUEUED_BYTES = 4 * FEED_PAGE.bytes;

const sizeOf = (page: EventFrames) => page.frames.reduce((size, piece) => size + piece.length, 0);

type Follower = {
  /** The last row id handed to this follower. */
  last: number;
  queue: FeedDelivery[];
  queued: number;
  /** Characters of the frames queued. */
  queuedBytes: number;
  wake: () => void;
  /** Called when it is told it is behind. */
  dropped: () => void;
  done: boolean;
  /**
   * The log holds more rows for it than its queue had room for (a backlog longer than a page):
   * reads pass it by until its queue has drained, then read on from its position.
   */
  lagging: boolean;
};

/**
 * One follow loop per thread, shared by all of its live streams: each wake-up of the thread (the
 * process's LISTEN connection) is one database read — from the position of the follower furthest
 * behind, scoped by the thread's owner and incarnation — whose rows are handed to every follower
 * past its own position. Reads of a thread never overlap: a wake-up during a read is one more read
 * after it. A follower's rows wait in its own queue, so a slow client delays no other; one that
 * falls FEED_MAX_QUEUED rows (or FEED_MAX_QUEUED_BYTES) behind is told so and dropped (it resumes
 * with Last-Event-ID; a route blocked writing to it cuts its connection: whenBehind). A
 * backlog longer than a page (a reconnect's) is read a page at a time as its follower takes them.
 *
 * A feed is keyed by thread, owner and incarnation: a stream of a thread that was deleted and
 * created again under the same id (by anyone) never reads the new thread's rows; its read finds
 * its thread gone and it ends with `deleted`.
 */
export function createThreadFeeds({
  db,
  events,
  pageLimit = FEED_PAGE,
  maxQueued = FEED_MAX_QUEUED,
  maxQueuedBytes = FEED_MAX_QUEUED_BYTES,
}: {
  db: pg.Pool;
  events: EventNotifier;
  pageLimit?: PageLimit;
  maxQueued?: number;
  maxQueuedBytes?: number;
}): ThreadFeeds {
  const feeds = new Map<string, Feed>();

  type Feed = {
    thread: OwnedThread;
    followers: Set<Follower>;
    listening: Promise<() => void>;
    reading: boolean;
    again: boolean;
    gone: boolean;
  };

  const deliver = (follower: Follower, delivery: FeedDelivery) => {
    if (follower.done) return;
    if ("frames" in delivery) {
      const waiting = follower.queue.length > 0;
      follower.last = delivery.frames.lastId;
      follower.queued += delivery.frames.count;
      follower.queuedBytes += sizeOf(delivery.frames);
      // A page into an empty queue is never too much (a single row may be larger than the bound).
      if (waiting && (follower.queued > maxQueued || follower.queuedBytes > maxQueuedBytes)) {
        follower.queue = [{ behind: true }];
        follower.done = true;
        follower.dropped();
      } else follower.queue.push(delivery);
    } else {
      follower.queue.push(delivery);
      follower.done = true;
    }
    follower.wake();
  };

  /** Whether a follower's queue can take another full page without passing its bounds (an empty one always can). */
  const hasRoom = (follower: Follower) =>
    follower.queued === 0 ||
    (follower.queued + pageLimit.rows <= maxQueued && follower.queuedBytes + pageLimit.bytes <= maxQueuedBytes);

  const readOnce = async (feed: Feed) => {
    let followers = [...feed.followers].filter((follower) => !follower.lagging);
    if (followers.length === 0) return;
    let from = Math.min(...followers.map((follower) => follower.last));
    for (;;) {
      const { present, page, full } = await readOwnedEventFrames(db, feed.thread, from, pageLimit);
      if (!present) {
        feed.gone = true;
        // Every follower, those this read passed by too: no read of the feed follows.
        for (const follower of feed.followers) deliver(follower, { deleted: true });
        return;
      }
      if (!page) return;
      for (const follower of followers) {
        const fresh = framesAfter(page, follower.last);
        if (fresh) deliver(follower, { frames: fresh });
      }
      if (!full) return;
      // A backlog is read as fast as its followers take it, not as fast as the database gives it:
      // one without room for the next page gets it once its queue has drained (take).
      for (const follower of followers) if (!hasRoom(follower)) follower.lagging = true;
      followers = followers.filter((follower) => !follower.lagging && !follower.done);
      if (followers.length === 0) return;
      from = Math.min(...followers.map((follower) => follower.last));
    }
  };

  const read = async (feed: Feed) => {
    if (feed.reading) {
      feed.again = true;
      return;
    }
    feed.reading = true;
    try {
      do {
        feed.again = false;
        await readOnce(feed).catch((error: unknown) => {
          for (const follower of feed.followers) deliver(follower, { failed: error });
        });
      } while (feed.again && !feed.gone && feed.followers.size > 0);
    } finally {
      feed.reading = false;
    }
  };

  const leave = (key: string, feed: Feed, follower: Follower) => {
    follower.done = true;
    follower.wake();
    feed.followers.delete(follower);
    if (feed.followers.size > 0) return;
    if (feeds.get(key) === feed) feeds.delete(key);
    void feed.listening.then(
      (unsubscribe) => unsubscribe(),
      () => undefined,
    );
  };

  return {
    get feeds() {
      return feeds.size;
    },
    async follow({ threadId, userId, afterId }) {
      // Listening before the first read: a commit it misses wakes this subscription.
      let missed = false;
      const stopListening = await events.subscribe(threadId, () => {
        missed = true;
      });
      let first: Awaited<ReturnType<typeof readThreadEventFrames>>;
      try {
        first = await readThreadEventFrames(db, { threadId, userId, afterId, limit: pageLimit });
      } catch (error) {
        stopListening();
        throw error;
      }
      if (!first) {
        stopListening();
        return undefined;
      }
      const { thread } = first;
      const key = JSON.stringify([thread.threadId, thread.ownerId, thread.incarnation]);
      let feed = feeds.get(key);
      if (!feed || feed.gone) {
        const created: Feed = {
          thread,
          followers: new Set(),
          reading: false,
          again: false,
          gone: false,
          listening: Promise.resolve(() => undefined),
        };
        // A wake-up after the notifier closed ends every follower (shutdown); any other is a read.
        created.listening = events.subscribe(thread.threadId, () => {
          if (events.closed) for (const follower of created.followers) follower.wake();
          else void read(created);
        });
        feeds.set(key, created);
        feed = created;
      }
      const joined = feed;
      const follower: Follower = {
        last: afterId,
        queue: [],
        queued: 0,
        queuedBytes: 0,
        wake: () => undefined,
        dropped: () => undefined,
        done: false,
        lagging: false,
      };
      // Queued before joining: a read of the feed meanwhile hands this follower only what comes after.
      if (first.page) deliver(follower, { frames: first.page });
      // A backlog longer than the first page is read on once that page is taken.
      follower.lagging = first.full;
      joined.followers.add(follower);
      try {
        await joined.listening;
      } catch (error) {
        leave(key, joined, follower);
        throw error;
      } finally {
        stopListening();
      }
      // The feed reads on only when something committed since the first read (or, once its first page is taken, the backlog is longer).
      if (missed) void read(joined);
      const take = (): FeedDelivery | undefined => {
        const delivery = follower.queue.shift();
        if (delivery && "frames" in delivery) {
          follower.queued -= delivery.frames.count;
          follower.queuedBytes -= sizeOf(delivery.frames);
        }
        if (follower.lagging && follower.queue.length === 0 && !follower.done) {
          follower.lagging = false;
          void read(joined);
        }
        return delivery ?? (follower.done || events.closed ? { closed: true } : undefined);
      };
      return {
        take,
        next: async (timeoutMs) => {
          for (;;) {
            const delivery = take();
            if (delivery) return delivery;
            const woken = await new Promise<boolean>((resolve) => {
              const timer = setTimeout(() => resolve(false), timeoutMs);
              follower.wake = () => {
                clearTimeout(timer);
                resolve(true);
              };
            });
            follower.wake = () => undefined;
            if (!woken) return null;
          }
        },
        close: () => leave(key, joined, follower),
        whenBehind: (listener) => {
          if (follower.queue[0] && "behind" in follower.queue[0]) listener();
          else follower.dropped = listener;
        },
      };
    },
  };
}
