import { NO_ANSWER_PREFIX } from "./model-errors.js";

/**
 * A model call made by this process with streaming on: the provider's server-sent events are read
 * as they arrive, each piece of answer text is handed to `onText`, and the pieces are assembled
 * into the JSON the provider answers without streaming, so AgentKit parses it exactly as it parses
 * a step.ai.infer result. OpenAI's chat completions stream (OpenAI and every OpenAI-compatible
 * server) and Anthropic's messages stream are understood.
 */

/** AgentKit's model adapter as step.ai.infer receives it: where to send the body, with which key. */
export type ModelCall = {
  url?: string;
  authKey?: string;
  format: string;
  onCall?: (model: ModelCall, body: Record<string, unknown>) => void;
};

/** The adapter formats whose streams are understood (INFERENCE=stream refuses the others at start-up). */
export const STREAMED_FORMATS = ["openai-chat", "anthropic"] as const;
type StreamedFormat = (typeof STREAMED_FORMATS)[number];

const isStreamedFormat = (format: string): format is StreamedFormat =>
  (STREAMED_FORMATS as readonly string[]).includes(format);

/** How long the stream may stay silent before the call is given up (the provider hung). */
export const STREAM_IDLE_TIMEOUT_MS = 120_000;

export async function streamCompletion(input: {
  model: ModelCall;
  body: Record<string, unknown>;
  onText: (text: string) => void;
  idleTimeoutMs?: number;
  /** Ends the call early (the user stopped the turn, or its text cannot be logged); the call then fails with the signal's reason. */
  signal?: AbortSignal | undefined;
}): Promise<unknown> {
  const call = { ...input.model };
  input.model.onCall?.(call, input.body);
  const format = streamedFormat(call.format);
  const idle = idleTimer(input.idleTimeoutMs ?? STREAM_IDLE_TIMEOUT_MS);
  try {
    const response = await fetch(call.url ?? "", {
      method: "POST",
      headers: headersFor(format, call.authKey),
      body: JSON.stringify({
        ...input.body,
        stream: true,
        ...(format === "openai-chat" ? { stream_options: { include_usage: true } } : {}),
      }),
      signal: input.signal ? AbortSignal.any([idle.signal, input.signal]) : idle.signal,
    }).catch((error: unknown) => {
      // What the gateway says when no answer came, with the reason (ECONNREFUSED, ENOTFOUND…).
      throw new Error(`${NO_ANSWER_PREFIX} (could not connect: ${describe(error)})`);
    });
    // The same text the gateway's failures become: the status and the provider's body, which failure-message.ts reads.
    if (!response.ok)
      throw new Error(`Model answered HTTP ${response.status}: ${(await response.text()).slice(0, 4_000)}`);
    if (!response.body) throw new Error("Model answered without a body");
    return await readCompletion(format, response.body, input.onText, idle.touch);
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
  throw new Error(`INFERENCE=stream cannot stream the ${format} format (only ${STREAMED_FORMATS.join(", ")})`);
}

function headersFor(format: StreamedFormat, key: string | undefined): Record<string, string> {
  const headers: Record<string, string> = { "content-type": "application/json", accept: "text/event-stream" };
  if (format === "openai-chat") headers.authorization = `Bearer ${key}`;
  else Object.assign(headers, { "x-api-key": key ?? "", "anthropic-version": "2023-06-01" });
  return headers;
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
) {
  const assembler = format === "openai-chat" ? openAiAssembler() : anthropicAssembler();
  let received = 0;
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

type Assembler = {
  add: (chunk: Record<string, unknown>) => string | undefined;
  complete: () => boolean;
  result: () => unknown;
};

type OpenAiToolCall = { id: string; type: string; function: { name: string; arguments: string } };
type OpenAiChunk = {
  id?: string;
  created?: number;
  model?: string;
  choices?: {
    index: number;
    delta?: {
      role?: string;
      content?: string | null;
      tool_calls?: ({ index: number } & Partial<OpenAiToolCall> & { function?: Partial<OpenAiToolCall["function"]> })[];
    };
    finish_reason?: string | null;
  }[];
  usage?: unknown;
};

/** OpenAI chat completion chunks → one chat completion: content concatenated, tool calls by index. */
function openAiAssembler(): Assembler {
  const meta: { id?: string; created?: number; model?: string; usage?: unknown } = {};
  let role = "assistant";
  let content = "";
  const toolCalls: OpenAiToolCall[] = [];
  let finishReason: string | null = null;
  return {
    add: (raw) => {
      const chunk = raw as OpenAiChunk;
      meta.id ??= chunk.id;
      meta.created ??= chunk.created;
      meta.model ??= chunk.model;
      if (chunk.usage) meta.usage = chunk.usage;
      const choice = chunk.choices?.find((c) => c.index === 0);
      if (!choice) return undefined;
      if (choice.finish_reason) finishReason = choice.finish_reason;
      const delta = choice.delta ?? {};
      if (delta.role) role = delta.role;
      for (const part of delta.tool_calls ?? []) {
        toolCalls[part.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } };
        const call = toolCalls[part.index]!;
        if (part.id) call.id = part.id;
        if (part.type) call.type = part.type;
        call.function.name += part.function?.name ?? "";
        call.function.arguments += part.function?.arguments ?? "";
      }
      if (!delta.content) return undefined;
      content += delta.content;
      return delta.content;
    },
    complete: () => finishReason !== null,
    result: () => ({
      id: meta.id,
      object: "chat.completion",
      created: meta.created,
      model: meta.model,
      choices: [
        {
          index: 0,
          // As the provider answers without streaming: no text is null, no tool call is no field.
          message: {
            role,
            content: content === "" && toolCalls.length > 0 ? null : content,
            ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
          },
          finish_reason: finishReason,
        },
      ],
      ...(meta.usage ? { usage: meta.usage } : {}),
    }),
  };
}

type AnthropicBlock = { type: string; text?: string; input?: unknown; [field: string]: unknown };
type AnthropicEvent = {
  type: string;
  index?: number;
  message?: Record<string, unknown> & { content?: AnthropicBlock[] };
  content_block?: AnthropicBlock;
  delta?: { type?: string; text?: string; partial_json?: string; stop_reason?: string; stop_sequence?: string | null };
  usage?: Record<string, unknown>;
};

/** Anthropic's message stream → one message: text blocks concatenated, tool inputs parsed from their JSON pieces. */
function anthropicAssembler(): Assembler {
  let message: Record<string, unknown> = { role: "assistant" };
  const blocks: AnthropicBlock[] = [];
  const inputs: string[] = [];
  let stopped = false;
  return {
    add: (raw) => {
      const event = raw as AnthropicEvent;
      const index = event.index ?? 0;
      switch (event.type) {
        case "message_start":
          message = { ...event.message };
          return undefined;
        case "content_block_start":
          blocks[index] = { ...event.content_block! };
          inputs[index] = "";
          return undefined;
        case "content_block_delta": {
          const block = blocks[index]!;
          if (event.delta?.type === "input_json_delta") inputs[index] += event.delta.partial_json ?? "";
          if (event.delta?.type !== "text_delta" || !event.delta.text) return undefined;
          block.text = (block.text ?? "") + event.delta.text;
          return event.delta.text;
        }
        case "content_block_stop": {
          const block = blocks[index]!;
          if (block.type === "tool_use") block.input = inputs[index] ? JSON.parse(inputs[index]) : (block.input ?? {});
          return undefined;
        }
        case "message_delta":
          message = {
            ...message,
            stop_reason: event.delta?.stop_reason,
            stop_sequence: event.delta?.stop_sequence ?? null,
            usage: { ...(message.usage as object), ...event.usage },
          };
          return undefined;
        case "message_stop":
          stopped = true;
          return undefined;
        default:
          return undefined;
      }
    },
    complete: () => stopped,
    result: () => ({ ...message, content: blocks.filter(Boolean) }),
  };
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
