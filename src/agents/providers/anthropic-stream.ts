import type { Assembler, StreamAdapter } from "./stream-adapter.js";

/** Anthropic's messages stream. */
export const anthropicStream: StreamAdapter = {
  headers: (key) => ({ "x-api-key": key ?? "", "anthropic-version": "2023-06-01" }),
  streamOptions: {},
  assembler: anthropicAssembler,
};

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
    usage: () => message.usage,
    result: () => ({ ...message, content: blocks.filter(Boolean) }),
  };
}
