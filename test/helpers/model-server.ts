import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A scripted OpenAI-compatible chat completions server. Each request takes the next reply from
 * the script (an empty script answers 500), and every request body is recorded so tests assert
 * exactly what the model saw.
 */
export type ScriptedReply =
  | { text: string; delayMs?: number }
  | { toolCalls: { name: string; arguments?: Record<string, unknown>; id?: string }[]; delayMs?: number }
  | { status: number; body?: unknown; delayMs?: number };

export type ChatRequest = {
  model: string;
  messages: { role: string; content?: unknown; tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[]; tool_call_id?: string }[];
  tools?: unknown[];
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
    if (reply.delayMs) await new Promise((resolve) => setTimeout(resolve, reply.delayMs));
    callCount += 1;
    if ("status" in reply) {
      res.writeHead(reply.status, { "content-type": "application/json" }).end(JSON.stringify(reply.body ?? { error: { message: `scripted ${reply.status}` } }));
      return;
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(completion(body.model, reply, callCount)));
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
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

function completion(model: string, reply: Exclude<ScriptedReply, { status: number }>, n: number) {
  const message =
    "text" in reply
      ? { role: "assistant", content: reply.text }
      : {
          role: "assistant",
          content: null,
          tool_calls: reply.toolCalls.map((call, i) => ({
            id: call.id ?? `call_${n}_${i}`,
            type: "function",
            function: { name: call.name, arguments: JSON.stringify(call.arguments ?? {}) },
          })),
        };
  return {
    id: `chatcmpl-${n}`,
    object: "chat.completion",
    created: 0,
    model,
    choices: [{ index: 0, message, finish_reason: "text" in reply ? "stop" : "tool_calls" }],
    usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
  };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8") || "{}";
}
