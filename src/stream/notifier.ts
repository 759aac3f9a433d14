import pg from "pg";
import { EVENTS_CHANNEL } from "../history/events.js";
import { logger } from "../platform/logger.js";

/** Called when a thread may have new events: the subscriber re-reads the log after its last id. */
type Wake = () => void;

export type EventNotifier = {
  /**
   * Wakes `wake` whenever events are appended to the thread, in any process on the database, and
   * after the LISTEN connection was re-established (notifications may have been lost meanwhile).
   * Resolves once LISTEN is active, so whatever commits afterwards wakes the subscriber; returns
   * the unsubscribe function.
   */
  subscribe: (threadId: string, wake: Wake) => Promise<() => void>;
  /**
   * Like subscribe, for every thread: `wake` gets the thread that may have new events, or null
   * after the LISTEN connection was re-established (any thread may have). Resolves once LISTEN is
   * active; returns the unsubscribe function.
   */
  subscribeAll: (wake: (threadId: string | null) => void) => Promise<() => void>;
  /** Subscriptions open now (each open event stream holds one). */
  readonly subscriptions: number;
  /** True once close() was called: subscribers stop when woken and find it closed. */
  readonly closed: boolean;
  /** Ends the LISTEN connection and wakes every subscriber (so each can end its stream). */
  close: () => Promise<void>;
};

const RECONNECT_DELAYS_MS = [100, 500, 1_000, 5_000];

/**
 * How often the LISTEN connection is asked to answer. A connection can die without a word (a
 * network that drops packets, a NAT or firewall that forgot it): nothing would ever arrive on it
 * again, and nothing would tell. One that has not answered by the next ping is given up.
 */
const PING_MS = 15_000;

/** How long close() waits for the LISTEN connection's end. */
const CLOSE_WAIT_MS = 1_000;

/**
 * One LISTEN connection per process, shared by every subscriber: opened on the first subscribe,
 * reconnected (with backoff) when it drops or stops answering its ping (every `pingMs`), closed by
 * close(). Notifications carry a thread id and an event id only; the notifier uses the thread id
 * to wake that thread's subscribers and nothing else, so a payload never stands in for what the
 * database holds.
 */
export function createEventNotifier(db: pg.Pool, { pingMs = PING_MS }: { pingMs?: number } = {}): EventNotifier {
  const subscribers = new Map<string, Set<Wake>>();
  const watchers = new Set<(threadId: string | null) => void>();
  let client: pg.Client | null = null;
  let listening: Promise<void> | null = null;
  let closed = false;
  let failures = 0;
  let reconnectTimer: NodeJS.Timeout | null = null;

  const wakeAll = () => {
    for (const wakes of subscribers.values()) for (const wake of wakes) wake();
    for (const watch of watchers) watch(null);
  };

  const connect = async (): Promise<void> => {
    const next = new pg.Client(db.options);
    next.on("notification", (message) => {
      const threadId = message.payload?.split(" ")[0];
      for (const wake of (threadId && subscribers.get(threadId)) || []) wake();
      if (threadId) for (const watch of watchers) watch(threadId);
    });
    next.on("error", (error) => {
      logger.warn({ err: error }, "event notifier: LISTEN connection failed");
      dropped(next);
    });
    next.on("end", () => dropped(next));
    try {
      await next.connect();
      await next.query(`LISTEN ${EVENTS_CHANNEL}`);
    } catch (error) {
      await next.end().catch(() => undefined);
      throw error;
    }
    if (closed) {
      await next.end();
      return;
    }
    client = next;
    failures = 0;
    let answered = true;
    const ping = setInterval(() => {
      if (client !== next) return clearInterval(ping);
      if (!answered) {
        clearInterval(ping);
        logger.warn("event notifier: LISTEN connection silent; reconnecting");
        dropped(next);
        // On a dead connection this may never finish: nothing waits for it.
        void next.end().catch(() => undefined);
        return;
      }
      answered = false;
      next.query("SELECT 1").then(
        () => {
          answered = true;
        },
        () => undefined,
      );
    }, pingMs);
    ping.unref();
  };

  const dropped = (which: pg.Client) => {
    if (client !== which || closed) return;
    client = null;
    listening = null;
    scheduleReconnect();
  };

  const scheduleReconnect = () => {
    if (closed || reconnectTimer) return;
    const delay = RECONNECT_DELAYS_MS[Math.min(failures, RECONNECT_DELAYS_MS.length - 1)]!;
    failures += 1;
    reconnectTimer = setTimeout(() => {
      reconnectTimer = null;
      if (closed || (subscribers.size === 0 && watchers.size === 0)) return;
      ensureListening()
        // Notifications sent while the connection was down are lost: every subscriber re-reads.
        .then(wakeAll)
        .catch(() => scheduleReconnect());
    }, delay);
  };

  const ensureListening = (): Promise<void> => {
    listening ??= connect().catch((error: unknown) => {
      listening = null;
      throw error;
    });
    return listening;
  };

  // A subscription that cannot start listening is undone before the error reaches its caller.
  const listenOrUndo = async (unsubscribe: () => void) => {
    try {
      await ensureListening();
    } catch (error) {
      unsubscribe();
      throw error;
    }
    return unsubscribe;
  };

  return {
    get closed() {
      return closed;
    },
    get subscriptions() {
      let count = 0;
      for (const wakes of subscribers.values()) count += wakes.size;
      return count;
    },
    async subscribe(threadId, wake) {
      if (closed) throw new Error("the event notifier is closed");
      const wakes = subscribers.get(threadId) ?? new Set<Wake>();
      subscribers.set(threadId, wakes);
      wakes.add(wake);
      const unsubscribe = () => {
        wakes.delete(wake);
        if (wakes.size === 0 && subscribers.get(threadId) === wakes) subscribers.delete(threadId);
      };
      return listenOrUndo(unsubscribe);
    },
    async subscribeAll(watch) {
      if (closed) throw new Error("the event notifier is closed");
      watchers.add(watch);
      const unsubscribe = () => {
        watchers.delete(watch);
      };
      return listenOrUndo(unsubscribe);
    },
    async close() {
      if (closed) return;
      closed = true;
      if (reconnectTimer) clearTimeout(reconnectTimer);
      const open = client;
      client = null;
      await listening?.catch(() => undefined);
      wakeAll();
      if (!open) return;
      // A dead connection never answers its goodbye: shutting down waits for it a moment at most.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        open.end().catch(() => undefined),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, CLOSE_WAIT_MS);
        }),
      ]);
      clearTimeout(timer);
    },
  };
}
