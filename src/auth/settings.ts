import type { FailureLimitSettings } from "./failure-limit.js";

/** How a JWT is checked: its signing key (a JWKS URL or a shared HS256 secret) and its claims. */
export type JwtSettings = {
  key: { jwksUrl: string } | { secret: string };
  issuer?: string;
  audience?: string;
  /** Seconds of clock difference tolerated on exp, nbf and iat. */
  clockSkewSeconds: number;
  /** The claim that holds the user id ("sub" unless configured). */
  userClaim: string;
  /** The longest lifetime accepted (exp − iat, or exp − now without iat), in seconds; unset: any. */
  maxAgeSeconds?: number;
};

/**
 * The ways a caller may prove who they are. API keys are always accepted (an operator creates
 * them); JWTs when configured; the dev header only when switched on explicitly.
 */
export type AuthSettings = { jwt?: JwtSettings; dev: boolean; failureLimit?: FailureLimitSettings };

/** The header AUTH=dev takes the user id from. */
export const DEV_USER_HEADER = "X-Threadline-User";
