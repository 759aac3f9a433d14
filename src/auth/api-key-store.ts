import type pg from "pg";

/**
 * API keys: each key's owner and secret hash (never the secret), created, listed and revoked by
 * the operator's commands and checked on every request that carries one. Auth owns this table's
 * statements; erasing a user deletes their keys with the rest of their data (src/history/users-sql.ts).
 */

/** An API key as listed to its operator: never its secret, which is not stored. */
export type ApiKeyRecord = { id: string; userId: string; name: string; createdAt: Date; revokedAt: Date | null };

const insertApiKeySql = `
  INSERT INTO api_keys (id, user_id, name, secret_hash) VALUES ($1, $2, $3, $4)
  RETURNING id, user_id, name, created_at, revoked_at`;

/** What insertApiKeySql, selectApiKeysSql and revokeApiKeySql return. */
type ApiKeyRow = { id: string; user_id: string; name: string; created_at: Date; revoked_at: Date | null };

/** A key that may still be used: revoked keys are never returned. */
const selectActiveApiKeySql = `
  SELECT user_id, secret_hash FROM api_keys WHERE id = $1 AND revoked_at IS NULL`;
type SelectActiveApiKeyRow = { user_id: string; secret_hash: Buffer };

const selectApiKeysSql = `
  SELECT id, user_id, name, created_at, revoked_at FROM api_keys
  WHERE $1::text IS NULL OR user_id = $1
  ORDER BY created_at, id`;

/** Revoking twice keeps the first revocation time. */
const revokeApiKeySql = `
  UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1
  RETURNING id, user_id, name, created_at, revoked_at`;

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
  const { rows } = await db.query<ApiKeyRow>(insertApiKeySql, [key.id, key.userId, key.name, key.secretHash]);
  return record(rows[0]!);
}

/** The owner and secret hash of a key that is not revoked; undefined for an unknown or revoked id. */
export async function findActiveApiKey(
  db: pg.Pool,
  id: string,
): Promise<{ userId: string; secretHash: Buffer } | undefined> {
  const { rows } = await db.query<SelectActiveApiKeyRow>(selectActiveApiKeySql, [id]);
  return rows[0] && { userId: rows[0].user_id, secretHash: rows[0].secret_hash };
}

/** Every key, or one user's keys, oldest first (revoked ones included, marked). */
export async function listApiKeys(db: pg.Pool, userId?: string): Promise<ApiKeyRecord[]> {
  const { rows } = await db.query<ApiKeyRow>(selectApiKeysSql, [userId ?? null]);
  return rows.map(record);
}

/** Revokes a key at once (the next request with it is refused); undefined when no key has this id. */
export async function revokeApiKey(db: pg.Pool, id: string): Promise<ApiKeyRecord | undefined> {
  const { rows } = await db.query<ApiKeyRow>(revokeApiKeySql, [id]);
  return rows[0] && record(rows[0]);
}
