import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type pg from "pg";
import { findActiveApiKey, insertApiKey, type ApiKeyRecord } from "./api-key-store.js";

/**
 * Server-to-server API keys: `tl_<id>_<secret>`, a 16-hex-digit id that finds the stored row and a
 * 256-bit secret of which only the SHA-256 is stored. The secret is random, not a password, so a
 * fast hash is enough: nothing can be guessed by hashing candidates.
 */
const API_KEY = /^tl_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$/;

const hashSecret = (secret: string) => createHash("sha256").update(secret).digest();

/** Whether a bearer token is meant as an API key (rather than a JWT). */
export const looksLikeApiKey = (token: string) => token.startsWith("tl_");

/** Creates a key for a user; the returned key is shown once and cannot be recovered later. */
export async function createApiKey(
  db: pg.Pool,
  input: { userId: string; name: string },
): Promise<{ key: string; record: ApiKeyRecord }> {
  const id = randomBytes(8).toString("hex");
  const secret = randomBytes(32).toString("base64url");
  const record = await insertApiKey(db, { id, userId: input.userId, name: input.name, secretHash: hashSecret(secret) });
  return { key: `tl_${id}_${secret}`, record };
}

/** The user a presented key belongs to; undefined for a malformed, unknown or revoked key. */
export async function verifyApiKey(db: pg.Pool, presented: string): Promise<string | undefined> {
  const [, id, secret] = API_KEY.exec(presented) ?? [];
  if (id === undefined || secret === undefined) return undefined;
  const stored = await findActiveApiKey(db, id);
  if (!stored) return undefined;
  // Constant-time comparison of equal-length digests: timing tells nothing about the secret.
  return timingSafeEqual(hashSecret(secret), stored.secretHash) ? stored.userId : undefined;
}
