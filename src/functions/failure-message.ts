import { NO_ANSWER_PREFIX } from "../agents/model-errors.js";
import { textStart } from "../agents/text-cut.js";

/** Longest error text recorded on a failed turn: enough for the provider's sentence, not its stack. */
export const MAX_FAILURE_MESSAGE = 500;

const TIMEOUT = /time[d ]?out|timeout|deadline exceeded|ETIMEDOUT|aborted/i;
const HTTP_STATUS = /\b(?:HTTP|status(?: code)?:?)\s*([1-5]\d\d)\b/i;

/**
 * The text recorded on a failed turn (and shown to the client): what went wrong, in the
 * provider's words where there are some, with the HTTP status, cut to MAX_FAILURE_MESSAGE
 * characters, and with anything that looks like a credential redacted.
 *
 * Model failures reach here as the step error of the inference: under Inngest's server the status
 * and the body the provider answered (put back by model-errors.ts from the AIGatewayError), under
 * INFERENCE=stream and in tests "HTTP <status>: <body>". Providers put their reason in
 * `{error: {message}}` (OpenAI, Gemini with a `status` word, OpenAI-compatible servers),
 * `{type: "error", error: {message}}` (Anthropic) or `{error: "text"}`.
 */
export function describeFailure(error: { name?: string; message?: string } | undefined): string {
  const message = (error?.message ?? "").trim();
  const status = HTTP_STATUS.exec(message)?.[1];
  const reason = providerReason(message);
  let text: string;
  if (reason !== undefined)
    text = `The model provider answered${status ? ` HTTP ${status}` : " with an error"}: ${reason}`;
  else if (message.startsWith(NO_ANSWER_PREFIX)) text = message;
  else if (TIMEOUT.test(message) || error?.name === "TimeoutError")
    text = `The model or a step did not answer in time: ${message || error?.name}`;
  else text = message || error?.name || "The run failed without an error message.";
  return truncate(redactSecrets(text));
}

/** The provider's own reason, from a JSON error body inside the message, if there is one. */
function providerReason(message: string): string | undefined {
  const start = message.indexOf("{");
  const end = message.lastIndexOf("}");
  if (start < 0 || end <= start) return undefined;
  let body: unknown;
  try {
    body = JSON.parse(message.slice(start, end + 1));
  } catch {
    return undefined;
  }
  if (typeof body !== "object" || body === null) return undefined;
  const inner = (body as { error?: unknown }).error ?? body;
  if (typeof inner === "string") return inner;
  if (typeof inner !== "object" || inner === null) return undefined;
  const {
    message: text,
    type,
    code,
    status,
  } = inner as { message?: unknown; type?: unknown; code?: unknown; status?: unknown };
  if (typeof text !== "string" || !text) return undefined;
  const kind = [type, code, status].filter((v) => typeof v === "string" || typeof v === "number").join(", ");
  return kind ? `${text} (${kind})` : text;
}

const SECRETS: [RegExp, string][] = [
  [/\bBearer\s+[^\s"',]+/gi, "Bearer [redacted]"],
  [/\b(sk|pk|rk)-[A-Za-z0-9_*-]{8,}/g, "$1-[redacted]"],
  [/\bAIza[0-9A-Za-z_-]{20,}/g, "[redacted]"],
  [/\b(signkey|evtkey)-[A-Za-z0-9_-]+/gi, "$1-[redacted]"],
  [/([?&](?:key|api[_-]?key|token|access_token)=)[^&\s"']+/gi, "$1[redacted]"],
  [/("?(?:x-api-key|api[_-]?key|authorization)"?\s*[:=]\s*"?)[^\s"',}]+/gi, "$1[redacted]"],
];

/** Removes what looks like an API key or a token, so a failure text is safe to store and show. */
function redactSecrets(text: string): string {
  return SECRETS.reduce((redacted, [pattern, replacement]) => redacted.replace(pattern, replacement), text);
}

// Never half an emoji: the stored text would show it as U+FFFD.
const truncate = (text: string) =>
  text.length <= MAX_FAILURE_MESSAGE ? text : `${textStart(text, MAX_FAILURE_MESSAGE - 1)}…`;
