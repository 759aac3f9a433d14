/**
 * What the streamed-completion driver needs from one provider: how to address it and how to turn its
 * stream's chunks back into the JSON the provider answers without streaming.
 */
export type StreamAdapter = {
  /** The request headers besides content-type and accept: the provider's way of sending the key. */
  headers: (key: string | undefined) => Record<string, string>;
  /** Fields the request body needs for streaming besides `stream: true`. */
  streamOptions: Record<string, unknown>;
  assembler: () => Assembler;
};

export type Assembler = {
  /** Takes one parsed chunk; returns the answer text it carries, if any. */
  add: (chunk: Record<string, unknown>) => string | undefined;
  /** Whether the provider said the answer is whole. */
  complete: () => boolean;
  result: () => unknown;
  /** The usage the provider reported so far (OpenAI: its last chunk; Anthropic: message_start, then message_delta), if any. */
  usage: () => unknown;
};
