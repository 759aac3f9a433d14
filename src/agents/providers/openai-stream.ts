import type { Assembler, StreamAdapter } from "./stream-adapter.js";

/** OpenAI's chat completions stream, spoken by OpenAI and every OpenAI-compatible server. */
export const openAiStream: StreamAdapter = {
  headers: (key) => ({ authorization: `Bearer ${key}` }),
  streamOptions: { stream_options: { include_usage: true } },
  assembler: openAiAssembler,
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
    usage: () => meta.usage,
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
