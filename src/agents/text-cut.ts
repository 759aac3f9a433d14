/**
 * The first `max` UTF-16 units of text, one fewer where the cut would split a surrogate pair (an
 * emoji, say): model providers' strict JSON parsers refuse a lone half with HTTP 400, on every
 * retry of the request; PostgreSQL refuses it in jsonb and stores it as U+FFFD in text. Every cut
 * of user or model text goes through here. Imports nothing.
 */
export const textStart = (text: string, max: number): string => {
  const start = text.slice(0, max);
  return /[\uD800-\uDBFF]$/.test(start) ? start.slice(0, -1) : start;
};
