import type { Context } from "hono";
import { getConnInfo } from "@hono/node-server/conninfo";
import { setBounded } from "../platform/bounded-map.js";

/**
 * How many failed authentications a client address may make: a burst of `perMinute`, refilled at
 * `perMinute` a minute. `addressHeader` names a header a trusted proxy sets to the client's address
 * (the last of its comma-separated values is the one the proxy saw); unset, the connection's peer.
 */
export type FailureLimitSettings = { perMinute: number; addressHeader?: string };

/** Addresses tracked at most; beyond it the least recently failed are forgotten (memory stays bounded). */
const MAX_TRACKED_ADDRESSES = 10_000;

type Bucket = { tokens: number; at: number };

/**
 * A token bucket per client address, spent only by failed authentications. In memory, per process:
 * it slows guessing down without a shared store (n instances allow n times the rate).
 */
export function failureLimiter(settings: FailureLimitSettings, now: () => number = Date.now) {
  const buckets = new Map<string, Bucket>();
  const perMs = settings.perMinute / 60_000;

  const refilled = (address: string): Bucket | undefined => {
    const bucket = buckets.get(address);
    if (bucket === undefined) return undefined;
    const t = now();
    bucket.tokens = Math.min(settings.perMinute, bucket.tokens + (t - bucket.at) * perMs);
    bucket.at = t;
    if (bucket.tokens >= settings.perMinute) buckets.delete(address);
    return bucket;
  };

  return {
    /** Seconds until this address may try again; undefined when it may now. */
    retryAfter(address: string): number | undefined {
      const bucket = refilled(address);
      if (bucket === undefined || bucket.tokens >= 1) return undefined;
      return Math.max(1, Math.ceil((1 - bucket.tokens) / perMs / 1000));
    },
    /** Spends a token of this address for one failed authentication. */
    failed(address: string): void {
      const bucket = refilled(address) ?? { tokens: settings.perMinute, at: now() };
      bucket.tokens -= 1;
      // Re-inserted last: the Map's order is then least recently failed first.
      setBounded(buckets, address, bucket, MAX_TRACKED_ADDRESSES);
    },
  };
}

/** The client address a request's failures are counted against; undefined when none is known (an in-process request). */
export function clientAddress(c: Context, settings: FailureLimitSettings): string | undefined {
  if (settings.addressHeader !== undefined) {
    const forwarded = c.req.header(settings.addressHeader)?.split(",").at(-1)?.trim();
    if (forwarded) return forwarded;
  }
  try {
    return getConnInfo(c).remote.address;
  } catch {
    return undefined;
  }
}
