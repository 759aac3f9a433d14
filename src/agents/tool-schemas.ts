import type { Tool } from "@inngest/agent-kit";
import { z } from "zod";

/**
 * The conversion AgentKit's request builder of each model format applies to a tool's parameters
 * (openai-chat: draft-7; anthropic: draft-2020-12; gemini: OpenAPI 3.0 of the input type).
 */
const CONVERSIONS: Record<string, z.core.ToJSONSchemaParams> = {
  "openai-chat": { target: "draft-7" },
  anthropic: { target: "draft-2020-12" },
  gemini: { target: "openapi-3.0", io: "input" },
};

const prepared = new Map<string, WeakMap<z.ZodType, z.ZodType>>();

/**
 * The tools, each with parameters whose JSON Schema is converted once per model format. AgentKit's
 * request builders convert every tool's parameters (z.toJSONSchema) on every model request, each
 * replay included: ~170 µs for roll_dice's, cold. A copy of the schema supplies its converted body
 * through zod's toJSONSchema override, which toJSONSchema finishes as it finishes its own (the
 * target's $schema, a fresh copy): ~70 µs. A copy whose result would differ from the schema's
 * (metadata only the original carries) is not used, so the request is the same byte for byte.
 */
export function withPreparedSchemas(tools: Tool.Any[], format: string): Tool.Any[] {
  const params = CONVERSIONS[format];
  if (!params) return tools;
  let schemas = prepared.get(format);
  if (!schemas) {
    schemas = new WeakMap();
    prepared.set(format, schemas);
  }
  const known = schemas;
  return tools.map((tool) => {
    const schema = tool.parameters as z.ZodType | undefined;
    if (!schema) return tool;
    let copy = known.get(schema);
    if (!copy) {
      copy = preparedCopy(schema, params);
      known.set(schema, copy);
    }
    return copy === schema ? tool : { ...tool, parameters: copy };
  });
}

function preparedCopy(schema: z.ZodType, params: z.core.ToJSONSchemaParams): z.ZodType {
  const converted = JSON.stringify(z.toJSONSchema(schema, params));
  const { $schema: _, ...body } = JSON.parse(converted) as Record<string, unknown>;
  const copy = schema.clone(z.core.util.cloneDef(schema) as typeof schema._zod.def);
  copy._zod.toJSONSchema = () => ({ ...body });
  return JSON.stringify(z.toJSONSchema(copy, params)) === converted ? copy : schema;
}
