import type pg from "pg";
import type { BusyPolicy } from "../history/busy-policy.js";
import type { BudgetLimits } from "../history/usage.js";
import type { RealtimePublisher } from "../stream/realtime-publisher.js";
import type { EventNotifier } from "../stream/notifier.js";
import type { StreamLimits, StreamSlots } from "../stream/stream-slots.js";
import type { ThreadFeeds } from "../stream/thread-feeds.js";

/** `id`, when given, makes Inngest drop a second event with the same id (within 24 hours). */
export type SendEvent = (event: {
  id?: string;
  name: string;
  data: Record<string, unknown>;
}) => Promise<{ ids: string[] }>;

/**
 * What the HTTP API needs: the database, a way to send events (Inngest's client in production),
 * for the event streams the process's LISTEN connection (createApp opens one on first use when
 * none is given; whoever passes one closes it), and Inngest realtime when it is on (REALTIME).
 * `streams`: the caps on open streams (createApp applies the defaults when none are given).
 * `busyPolicy`: BUSY_POLICY, for a message whose request names no busy policy (default enqueue).
 * `budgets`: every user's default usage limits (BUDGET_*); a user's own budget replaces them.
 */
export type ApiDeps = {
  db: pg.Pool;
  sendEvent: SendEvent;
  events?: EventNotifier;
  realtime?: RealtimePublisher | undefined;
  streams?: StreamLimits | undefined;
  busyPolicy?: BusyPolicy | undefined;
  budgets?: BudgetLimits | undefined;
};

/** What the streaming routes share: the notifier, one follow loop per thread, and the stream slots. */
export type StreamDeps = { events: EventNotifier; feeds: ThreadFeeds; slots: StreamSlots };
