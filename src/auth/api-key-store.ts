import type pg from "pg";
import * as sql from "../history/sql.js";

/** An API key as listed to its operator: never its secret, which is not stored. */
export type ApiKeyRecord = { id: string; userId: string; name: string; createdAt: Date; revokedAt: Date | null };

type ApiKeyRow = { id: string; user_id: string; name: string; created_at: Date; revoked_at: Date | null };

const record = (row: ApiKeyRow): ApiKeyRecord => ({
  id: row.id,
  userId: row.user_id,
  name: row.name,
  createdAt: row.created_at,
  revokedAt: row.revoked_at,
});

export async function insertApiKey(
  db: pg.Pool,
  key: { id: string; userId: string; name: string; secretHash: Buffer },
): Promise<ApiKeyRecord> {
  const { rows } = await db.query<ApiKeyRow>(sql.insertApiKey, [key.id, key.userId, key.name, key.secretHash]);
  return record(rows[0]!);
}

/** The owner and secret hash of a key that is not revoked; undefined for an unknown or revoked id. */
export async function findActiveApiKey(
  db: pg.Pool,
  id: string,
): Promise<{ userId: string; secretHash: Buffer } | undefined> {
  const { rows } = await db.query<{ user_id: string; secret_hash: Buffer }>(sql.selectActiveApiKey, [id]);
  return rows[0] && { userId: rows[0].user_id, secretHash: rows[0].secret_hash };
}

/** Every key, or one user's keys, oldest first (revoked ones included, marked). */
export async function listApiKeys(db: pg.Pool, userId?: string): Promise<ApiKeyRecord[]> {
  const { rows } = await db.query<ApiKeyRow>(sql.selectApiKeys, [userId ?? null]);
  return rows.map(record);
}

/** Revokes a key at once (the next request with it is refused); undefined when no key has this id. */
export async function revokeApiKey(db: pg.Pool, id: string): Promise<ApiKeyRecord | undefined> {
  const { rows } = await db.query<ApiKeyRow>(sql.revokeApiKey, [id]);
  return rows[0] && record(rows[0]);
}
