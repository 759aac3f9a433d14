import { NO_ANSWER_PREFIX } from "./model-errors.js";
import { anthropicStream } from "./providers/anthropic-stream.js";
import { openAiStream } from "./providers/openai-stream.js";
import type { StreamAdapter } from "./providers/stream-adapter.js";

/**
 * A model call made by this process with streaming on: the provider's server-sent events are read
 * as they arrive, each piece of answer text is handed to `onText`, and the pieces are assembled
 * into the JSON the provider answers without streaming, so AgentKit parses it exactly as it parses
 * a step.ai.infer result. Each provider's stream is read by its adapter in ./providers.
 */

/** AgentKit's model adapter as step.ai.infer receives it: where to send the body, with which key. */
export type ModelCall = {
  url?: string;
  authKey?: string;
  format: string;
  onCall?: (model: ModelCall, body: Record<string, unknown>) => void;
};

/** The adapter formats whose streams are understood (INFERENCE=stream refuses the others at start-up). */
type StreamedFormat = "openai-chat" | "anthropic";
const STREAM_ADAPTERS: Record<StreamedFormat, StreamAdapter> = {
  "openai-chat": openAiStream,
  anthropic: anthropicStream,
};

const isStreamedFormat = (format: string): format is StreamedFormat => Object.hasOwn(STREAM_ADAPTERS, format);

/** How long the stream may stay silent before the call is given up (the provider hung). */
const STREAM_IDLE_TIMEOUT_MS = 120_000;

export async function streamCompletion(input: {
  model: ModelCall;
  body: Record<string, unknown>;
  onText: (text: string) => void;
  idleTimeoutMs?: number;
  /** Called once the call ends, succeeded or failed, with the usage the provider reported, if it reported any. */
  onUsage?: (usage: unknown) => void;
  /** Ends the call early (the user stopped the turn, or its text cannot be logged); the call then fails with the signal's reason. */
  signal?: AbortSignal | undefined;
}): Promise<unknown> {
  const call = { ...input.model };
  input.model.onCall?.(call, input.body);
  const format = streamedFormat(call.format);
  const adapter = STREAM_ADAPTERS[format];
  const idle = idleTimer(input.idleTimeoutMs ?? STREAM_IDLE_TIMEOUT_MS);
  try {
    const response = await fetch(call.url ?? "", {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream", ...adapter.headers(call.authKey) },
      body: JSON.stringify({ ...input.body, stream: true, ...adapter.streamOptions }),
      signal: input.signal ? AbortSignal.any([idle.signal, input.signal]) : idle.signal,
    }).catch((error: unknown) => {
      // What the gateway says when no answer came, with the reason (ECONNREFUSED, ENOTFOUND…).
      throw new Error(`${NO_ANSWER_PREFIX} (could not connect: ${describe(error)})`);
    });
    // The same text the gateway's failures become: the status and the provider's body, which failure-message.ts reads.
    if (!response.ok)
      throw new Error(`Model answered HTTP ${response.status}: ${(await response.text()).slice(0, 4_000)}`);
    if (!response.body) throw new Error("Model answered without a body");
    return await readCompletion(format, response.body, input.onText, idle.touch, input.onUsage);
  } catch (error) {
    if (input.signal?.aborted) throw input.signal.reason;
    throw idle.signal.aborted
      ? new Error(`The model stream was silent for more than ${idle.ms / 1000} s: it timed out`)
      : error;
  } finally {
    idle.stop();
  }
}

function streamedFormat(format: string): StreamedFormat {
  if (isStreamedFormat(format)) return format;
  throw new Error(
    `INFERENCE=stream cannot stream the ${format} format (only ${Object.keys(STREAM_ADAPTERS).join(", ")})`,
  );
}

/**
 * Reads a provider's event stream to its end and returns the assembled answer. A stream that
 * breaks off, or ends before the provider said it was complete, fails: a partial answer is never
 * returned as if it were whole.
 */
export async function readCompletion(
  format: StreamedFormat,
  body: ReadableStream<Uint8Array>,
  onText: (text: string) => void,
  onBytes: () => void = () => {},
  onUsage: (usage: unknown) => void = () => {},
) {
  const assembler = STREAM_ADAPTERS[format].assembler();
  let received = 0;
  // A stream that reported usage and then failed was billed all the same: its usage is handed on either way.
  try {
    for await (const frame of serverSentEvents(body, onBytes)) {
      if (frame.data === "[DONE]") break;
      const chunk = JSON.parse(frame.data) as Record<string, unknown>;
      // Providers report a failure that happens after the headers as an error event in the stream.
      if ("error" in chunk) throw new ProviderStreamError(frame.data);
      const text = assembler.add(chunk);
      if (text) {
        received += text.length;
        onText(text);
      }
    }
  } catch (error) {
    if (error instanceof ProviderStreamError) throw new Error(`Model request failed: ${error.message.slice(0, 4_000)}`);
    throw new Error(`The model's streamed answer broke off after ${received} characters: ${describe(error)}`);
  } finally {
    const usage = assembler.usage();
    if (usage !== undefined) onUsage(usage);
  }
  if (!assembler.complete())
    throw new Error(`The model's streamed answer ended after ${received} characters without finishing`);
  return assembler.result();
}

class ProviderStreamError extends Error {}

const describe = (error: unknown) => {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  const message = error instanceof Error ? error.message : String(error);
  const reason = cause?.code ?? cause?.message;
  return reason ? `${message} (${reason})` : message;
};

/** The frames of a text/event-stream body: each one's event name and its (joined) data lines. */
async function* serverSentEvents(
  body: ReadableStream<Uint8Array>,
  onBytes: () => void,
): AsyncGenerator<{ event: string; data: string }> {
  const decoder = new TextDecoder();
  let buffer = "";
  let frame = { event: "message", data: [] as string[] };
  for await (const bytes of body) {
    onBytes();
    buffer += decoder.decode(bytes, { stream: true });
    for (let end = buffer.indexOf("\n"); end >= 0; end = buffer.indexOf("\n")) {
      const line = buffer.slice(0, end).replace(/\r$/, "");
      buffer = buffer.slice(end + 1);
      if (line === "") {
        if (frame.data.length > 0) yield { event: frame.event, data: frame.data.join("\n") };
        frame = { event: "message", data: [] };
      } else if (line.startsWith("data:")) frame.data.push(line.slice(5).replace(/^ /, ""));
      else if (line.startsWith("event:")) frame.event = line.slice(6).trim();
      // Comments (": keep-alive") and other fields carry nothing for the answer.
    }
  }
  if (frame.data.length > 0) yield { event: frame.event, data: frame.data.join("\n") };
}

/** Aborts the call when no byte arrived for `ms`; every chunk of the stream restarts the clock. */
function idleTimer(ms: number) {
  const controller = new AbortController();
  let timer = setTimeout(() => controller.abort(), ms);
  return {
    ms,
    signal: controller.signal,
    touch: () => {
      clearTimeout(timer);
      timer = setTimeout(() => controller.abort(), ms);
    },
    stop: () => clearTimeout(timer),
  };
}

/**
 * Why INFERENCE=stream cannot run with the configured model, or undefined when it can: a refusal
 * at start-up beats turns that fail on every message.
 */
export function streamingRefusal(model: { provider: string; model: { format: string } }): string | undefined {
  if (isStreamedFormat(model.model.format)) return undefined;
  return `INFERENCE=stream streams OpenAI-compatible and Anthropic models, not ${model.provider} (${model.model.format}): unset INFERENCE (the Inngest server then calls the model) or configure OPENAI_API_KEY / OPENAI_BASE_URL or ANTHROPIC_API_KEY`;
}
