import { z } from "zod";

/**
 * Text PostgreSQL can store. Messages live in jsonb, which refuses NUL (U+0000) and lone UTF-16
 * surrogates (a high surrogate without its low half, or the reverse). Input carrying them is
 * refused at the edge (the zod schemas of events and HTTP bodies), naming the field; text the
 * model writes is sanitized before it is stored instead, because refusing it would lose the answer.
 * Imports: zod only.
 */

// Without the `u` flag a regular expression sees UTF-16 code units, so it can find the lone halves.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is the character this refuses.
const UNSAFE_GLOBAL = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** Why a string cannot be stored, or undefined when it can. */
function unsafeTextProblem(text: string): string | undefined {
  const nul = text.indexOf("\u0000");
  if (nul >= 0) return `must not contain the NUL character (U+0000, at index ${nul}): remove it`;
  const lone = LONE_SURROGATE.exec(text);
  if (lone) return `must not contain a lone UTF-16 surrogate (at index ${lone.index}): send well-formed Unicode text`;
  return undefined;
}

/** A string schema that refuses NUL and lone surrogates; the issue's path names the field. */
export const safeString = (params?: Parameters<typeof z.string>[0]) =>
  z.string(params).superRefine((text, ctx) => {
    const problem = unsafeTextProblem(text);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  });

/**
 * The deepest nesting of arrays and objects accepted in JSON a client sends: far beyond any real
 * value, and well within what JSON.stringify (which overflows the stack a few thousand levels
 * down) and the events built from it can take.
 */
const MAX_JSON_DEPTH = 512;

/** Whether a value is nested no deeper than MAX_JSON_DEPTH, refusing unsafe strings on the way. */
function checkJson(value: unknown, ctx: z.RefinementCtx, path: PropertyKey[], depth: number): boolean {
  if (typeof value === "string") {
    const problem = unsafeTextProblem(value);
    if (problem) ctx.addIssue({ code: "custom", path, message: problem });
    return true;
  }
  if (value === null || typeof value !== "object") return true;
  if (depth >= MAX_JSON_DEPTH) return false;
  if (Array.isArray(value)) return value.every((item, index) => checkJson(item, ctx, [...path, index], depth + 1));
  return Object.entries(value).every(([key, item]) => {
    // The path stops at the object: the offending key itself must not travel on in error messages.
    const problem = unsafeTextProblem(key);
    if (problem) ctx.addIssue({ code: "custom", path, message: `a key ${problem}` });
    return checkJson(item, ctx, [...path, key], depth + 1);
  });
}

/**
 * Refuses NUL and lone surrogates anywhere in a JSON value (tool inputs and results, however
 * nested), object keys included, with the path to the offending string (or key's object); and a
 * value nested deeper than MAX_JSON_DEPTH, at its own path, as a fatal issue. False when it was too
 * deep (its size must then not be measured: JSON.stringify would overflow the stack).
 */
export function refuseUnsafeJson(value: unknown, ctx: z.RefinementCtx, path: PropertyKey[] = []): boolean {
  if (checkJson(value, ctx, path, 0)) return true;
  ctx.addIssue({
    code: "custom",
    path,
    message: `is nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects: send flatter JSON`,
    // Fatal: the checks of the schemas around it (a conversation's size) are not run on it.
    continue: false,
  });
  return false;
}

/**
 * Replaces each NUL and lone surrogate with U+FFFD (the Unicode replacement character) rather
 * than removing it: the text keeps its length and shape (two words a NUL separated stay apart),
 * a reader sees that something was there, and it is what well-formed UTF-16 conversion
 * (String.prototype.toWellFormed) does for lone surrogates, so both cases look the same.
 */
export const sanitizeText = (text: string): string => text.replace(UNSAFE_GLOBAL, "\uFFFD");

/** sanitizeText applied to every string of a JSON value, object keys included. */
export function sanitizeJson<T>(value: T): T {
  if (typeof value === "string") return sanitizeText(value) as T;
  if (Array.isArray(value)) return value.map(sanitizeJson) as T;
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [sanitizeText(key), sanitizeJson(item)])) as T;
  }
  return value;
}
