import type pg from "pg";

export type SendEvent = (event: { name: string; data: Record<string, unknown> }) => Promise<{ ids: string[] }>;

/** What the HTTP API needs: the database and a way to send events (Inngest's client in production). */
export type ApiDeps = { db: pg.Pool; sendEvent: SendEvent };
