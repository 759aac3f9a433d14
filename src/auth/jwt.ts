import { createRemoteJWKSet, errors, jwtVerify, type JWTVerifyOptions } from "jose";
import type { JwtSettings } from "./settings.js";

/** A token that is not acceptable; the message says why, for the 401 answer. */
export class TokenRefused extends Error {}

/**
 * Verifies bearer JWTs against the configured key (the JWKS is fetched and cached by jose) and
 * returns the raw user claim. Only failures of the token itself become TokenRefused; a JWKS
 * endpoint that cannot be reached is a fault of ours and is thrown as is.
 */
export function jwtVerifier(settings: JwtSettings): (token: string) => Promise<unknown> {
  const options: JWTVerifyOptions = {
    issuer: settings.issuer,
    audience: settings.audience,
    clockTolerance: settings.clockSkewSeconds,
    // A token without an expiry would be valid forever.
    requiredClaims: ["exp"],
  };
  const verify = keyVerifier(settings.key, options);

  return async (token) => {
    const { payload } = await verify(token).catch((error: unknown) => Promise.reject(refusal(error)));
    if (settings.maxAgeSeconds !== undefined) {
      // A token's whole lifetime, from its issue (or from now, when it says nothing of it) to its
      // expiry: a stolen long-lived token stays usable as long as it says.
      const from = typeof payload.iat === "number" ? payload.iat : Date.now() / 1000;
      const lifetime = Math.round(payload.exp! - from);
      if (lifetime > settings.maxAgeSeconds + settings.clockSkewSeconds) {
        throw new TokenRefused(
          `it is valid for ${lifetime} s${typeof payload.iat === "number" ? " (exp - iat)" : " from now (it has no iat)"}, longer than this server accepts (AUTH_JWT_MAX_AGE: ${settings.maxAgeSeconds} s)`,
        );
      }
    }
    return payload[settings.userClaim];
  };
}

function keyVerifier(key: JwtSettings["key"], options: JWTVerifyOptions) {
  if ("jwksUrl" in key) {
    const jwks = createRemoteJWKSet(new URL(key.jwksUrl));
    return (token: string) => jwtVerify(token, jwks, options);
  }
  // A shared secret only ever signs HS256: no other algorithm may be tried with it.
  const secret = new TextEncoder().encode(key.secret);
  return (token: string) => jwtVerify(token, secret, { ...options, algorithms: ["HS256"] });
}

function refusal(error: unknown): unknown {
  if (error instanceof errors.JWTExpired) return new TokenRefused("the token has expired");
  if (error instanceof errors.JWTClaimValidationFailed)
    return new TokenRefused(`its ${error.claim} claim is not accepted (${error.reason})`);
  if (error instanceof errors.JWSSignatureVerificationFailed) return new TokenRefused("its signature does not verify");
  if (error instanceof errors.JWKSNoMatchingKey) return new TokenRefused("no key of the identity provider matches it");
  if (error instanceof errors.JOSEAlgNotAllowed || error instanceof errors.JOSENotSupported)
    return new TokenRefused("its signing algorithm is not accepted");
  if (error instanceof errors.JWSInvalid || error instanceof errors.JWTInvalid)
    return new TokenRefused("it is not a valid JWT");
  return error;
}
