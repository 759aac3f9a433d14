import type pg from "pg";
import type { RealtimePublisher } from "../realtime/publisher.js";
import type { EventNotifier } from "../stream/notifier.js";

/** `id`, when given, makes Inngest drop a second event with the same id (within 24 hours). */
export type SendEvent = (event: { id?: string; name: string; data: Record<string, unknown> }) => Promise<{ ids: string[] }>;

/**
 * What the HTTP API needs: the database, a way to send events (Inngest's client in production),
 * for the event streams the process's LISTEN connection (createApp opens one on first use when
 * none is given; whoever passes one closes it), and Inngest realtime when it is on (REALTIME).
 */
export type ApiDeps = { db: pg.Pool; sendEvent: SendEvent; events?: EventNotifier; realtime?: RealtimePublisher | undefined };
