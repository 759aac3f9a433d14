import type pg from "pg";

/** `id`, when given, makes Inngest drop a second event with the same id (within 24 hours). */
export type SendEvent = (event: { id?: string; name: string; data: Record<string, unknown> }) => Promise<{ ids: string[] }>;

/** What the HTTP API needs: the database and a way to send events (Inngest's client in production). */
export type ApiDeps = { db: pg.Pool; sendEvent: SendEvent };
