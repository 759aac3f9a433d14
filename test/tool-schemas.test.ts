import { anthropic, createAgenticModelFromAiAdapter, gemini, type Message, openai } from "@inngest/agent-kit";
import type pg from "pg";
import { describe, expect, it } from "vitest";
import { withPreparedSchemas } from "../src/agents/tool-schemas.js";
import { currentTimeTool, rollDiceTool } from "../src/agents/tools.js";
import { userMemory } from "../src/memory/user-memory.js";

const tools = [
  currentTimeTool,
  rollDiceTool,
  ...userMemory().tools!({ db: undefined as unknown as pg.Pool, userId: "user-1" }),
];
const messages: Message[] = [{ type: "text", role: "user", content: "Roll two dice." }];
const models = [
  openai({ model: "gpt-4o-mini", apiKey: "test" }),
  anthropic({ model: "claude-3-5-haiku-latest", apiKey: "test", defaultParameters: { max_tokens: 1024 } }),
  gemini({ model: "gemini-2.0-flash", apiKey: "test" }),
];

describe("tool parameters converted once per model format", () => {
  for (const model of models) {
    it(`${model.format}: AgentKit builds the same request, byte for byte, from converted copies`, () => {
      const { requestParser } = createAgenticModelFromAiAdapter(model);
      const prepared = withPreparedSchemas(tools, model.format);
      expect(prepared.every((tool, i) => tool.parameters !== tools[i]!.parameters)).toBe(true);
      const plain = JSON.stringify(requestParser(model, messages, tools, "auto"));
      expect(JSON.stringify(requestParser(model, messages, prepared, "auto"))).toBe(plain);
      // Built again (each request builds its tools): the same copies, the same request.
      const again = withPreparedSchemas(tools, model.format);
      expect(again.map((tool) => tool.parameters)).toEqual(prepared.map((tool) => tool.parameters));
      expect(JSON.stringify(requestParser(model, messages, again, "auto"))).toBe(plain);
    });
  }

  it("keeps a schema whose copy would convert otherwise (metadata on the schema itself)", () => {
    const described = { ...rollDiceTool, parameters: rollDiceTool.parameters!.meta({ id: "dice", title: "Dice" }) };
    const model = models[0]!;
    const { requestParser } = createAgenticModelFromAiAdapter(model);
    const [prepared] = withPreparedSchemas([described], model.format);
    expect(JSON.stringify(requestParser(model, messages, [prepared!], "auto"))).toBe(
      JSON.stringify(requestParser(model, messages, [described], "auto")),
    );
  });

  it("leaves the tools of a format it does not know as they are", () => {
    expect(withPreparedSchemas(tools, "grok")).toBe(tools);
  });

  it("checks the copies' input as the schemas do", () => {
    const [, dice] = withPreparedSchemas(tools, "openai-chat");
    expect(dice!.parameters!.safeParse({ count: 2, sides: 6 }).success).toBe(true);
    expect(dice!.parameters!.safeParse({ count: 11, sides: 6 }).success).toBe(false);
  });
});
