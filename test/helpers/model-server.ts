import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A scripted OpenAI-compatible chat completions server. Each request takes the next reply from
 * the script (an empty script answers 500), and every request body is recorded so tests assert
 * exactly what the model saw. A request with `stream: true` gets a text or tool-call reply as
 * server-sent events (chat completion chunks, then `data: [DONE]`), shaped by the reply's `stream`.
 * Every answer reports its usage (the reply's `usage`, else DEFAULT_USAGE): in the completion, and
 * in the stream's last chunk when the request asks for it (stream_options.include_usage).
 */
type ScriptedReply =
  | { text: string; delayMs?: number; stream?: StreamScript; usage?: Usage }
  | {
      toolCalls: { name: string; arguments?: Record<string, unknown>; id?: string }[];
      delayMs?: number;
      stream?: StreamScript;
      usage?: Usage;
    }
  | { status: number; body?: unknown; delayMs?: number };

/** How a streamed reply is sent. Chunks are counted from 1 in the order they are sent. */
type StreamScript = {
  /** The text's pieces, one chunk each (they must join to the reply's text); default: the whole text in one chunk. */
  chunks?: string[];
  /** Pause before every chunk after the first. */
  pauseMs?: number;
  /** After sending this many chunks, wait until the gate is released (see gate()). */
  holdAfter?: { chunks: number; gate: Gate };
  /** Destroy the connection right after sending this many chunks: the reply never finishes. */
  dieAfter?: number;
  /** Destroy the connection right after the usage chunk, before `[DONE]`: billed, but the stream fails. */
  dieAfterUsage?: boolean;
};

/** Usage as OpenAI reports it. */
type Usage = {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
  completion_tokens_details?: { reasoning_tokens: number };
};

/** What an answer reports when its reply names no usage. */
const DEFAULT_USAGE: Usage = { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 };

/** Lets a test hold a streamed reply: `reached` resolves when the server waits at it, `release()` lets it go on (`arrive` and `released` are the server's side). */
export type Gate = { reached: Promise<void>; release: () => void; arrive: () => void; released: Promise<void> };

export function gate(): Gate {
  let arrive!: () => void;
  let release!: () => void;
  const reached = new Promise<void>((resolve) => (arrive = resolve));
  const released = new Promise<void>((resolve) => (release = resolve));
  return { reached, release, arrive, released };
}

export type ChatRequest = {
  model: string;
  messages: {
    role: string;
    content?: unknown;
    tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[];
    tool_call_id?: string;
  }[];
  tools?: unknown[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
};

export type ModelServer = {
  baseUrl: string;
  requests: ChatRequest[];
  script: (...replies: ScriptedReply[]) => void;
  reset: () => void;
  close: () => Promise<void>;
};

export async function startModelServer(): Promise<ModelServer> {
  const requests: ChatRequest[] = [];
  let replies: ScriptedReply[] = [];
  let callCount = 0;

  const server: Server = createServer(async (req, res) => {
    const body = JSON.parse(await readBody(req)) as ChatRequest;
    if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
      res.writeHead(404).end();
      return;
    }
    requests.push(body);
    const reply = replies.shift() ?? { status: 500, body: { error: { message: "script exhausted" } } };
    if (reply.delayMs) await sleep(reply.delayMs);
    callCount += 1;
    if ("status" in reply) {
      res
        .writeHead(reply.status, { "content-type": "application/json" })
        .end(JSON.stringify(reply.body ?? { error: { message: `scripted ${reply.status}` } }));
      return;
    }
    if (body.stream === true) {
      await streamCompletion(res, body, reply, callCount);
      return;
    }
    res
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify(completion(body.model, reply, callCount)));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;

  return {
    baseUrl: `http://127.0.0.1:${port}/v1/`,
    requests,
    script: (...next) => {
      replies.push(...next);
    },
    reset: () => {
      requests.length = 0;
      replies = [];
    },
    close: () =>
      new Promise((resolve) => {
        // A test that failed while a reply was held must not keep the server open.
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

type ContentReply = Exclude<ScriptedReply, { status: number }>;

function completion(model: string, reply: ContentReply, n: number) {
  const message =
    "text" in reply
      ? { role: "assistant", content: reply.text }
      : { role: "assistant", content: null, tool_calls: toolCalls(reply, n) };
  return {
    id: `chatcmpl-${n}`,
    object: "chat.completion",
    created: 0,
    model,
    choices: [{ index: 0, message, finish_reason: "text" in reply ? "stop" : "tool_calls" }],
    usage: reply.usage ?? DEFAULT_USAGE,
  };
}

const toolCalls = (reply: Extract<ContentReply, { toolCalls: unknown }>, n: number) =>
  reply.toolCalls.map((call, i) => ({
    id: call.id ?? `call_${n}_${i}`,
    type: "function",
    function: { name: call.name, arguments: JSON.stringify(call.arguments ?? {}) },
  }));

/**
 * Sends the reply as OpenAI streams it: the role first, then the text's pieces (or each tool call's
 * id and name, then its arguments in two halves, as providers split them), then the finish reason,
 * usage when asked for, and `[DONE]`. Only the content-carrying chunks count for holdAfter/dieAfter.
 */
async function streamCompletion(res: ServerResponse, request: ChatRequest, reply: ContentReply, n: number) {
  const script = reply.stream ?? {};
  const base = { id: `chatcmpl-${n}`, object: "chat.completion.chunk", created: 0, model: request.model };
  const chunk = (delta: Record<string, unknown>, finish_reason: string | null = null) => ({
    ...base,
    choices: [{ index: 0, delta, finish_reason }],
  });
  const deltas = "text" in reply ? textDeltas(reply.text, script.chunks) : toolCallDeltas(toolCalls(reply, n));

  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  await send(res, chunk({ role: "assistant", content: "" }));
  for (const [i, delta] of deltas.entries()) {
    if (i > 0 && script.pauseMs) await sleep(script.pauseMs);
    await send(res, chunk(delta));
    const sent = i + 1;
    if (script.dieAfter === sent) {
      res.socket?.destroy();
      return;
    }
    if (script.holdAfter?.chunks === sent) {
      script.holdAfter.gate.arrive();
      await script.holdAfter.gate.released;
    }
  }
  await send(res, chunk({}, "text" in reply ? "stop" : "tool_calls"));
  if (request.stream_options?.include_usage) {
    await send(res, { ...base, choices: [], usage: reply.usage ?? DEFAULT_USAGE });
    if (script.dieAfterUsage) {
      res.socket?.destroy();
      return;
    }
  }
  res.end("data: [DONE]\n\n");
}

function textDeltas(text: string, chunks: string[] = [text]) {
  if (chunks.join("") !== text)
    throw new Error(`scripted stream chunks ${JSON.stringify(chunks)} do not join to the text ${JSON.stringify(text)}`);
  return chunks.map((content) => ({ content }));
}

function toolCallDeltas(calls: ReturnType<typeof toolCalls>) {
  return calls.flatMap((call, index) => {
    const half = Math.ceil(call.function.arguments.length / 2);
    return [
      { tool_calls: [{ index, id: call.id, type: "function", function: { name: call.function.name, arguments: "" } }] },
      { tool_calls: [{ index, function: { arguments: call.function.arguments.slice(0, half) } }] },
      { tool_calls: [{ index, function: { arguments: call.function.arguments.slice(half) } }] },
    ];
  });
}

/** Writes one server-sent event and waits until it has left the process, so a later destroy cannot drop it. */
const send = (res: ServerResponse, data: unknown) =>
  new Promise<void>((resolve, reject) =>
    res.write(`data: ${JSON.stringify(data)}\n\n`, (error) => (error ? reject(error) : resolve())),
  );

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8") || "{}";
}
