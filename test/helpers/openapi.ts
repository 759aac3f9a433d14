import { expect } from "vitest";
import { z } from "zod";

/**
 * Reading the app's OpenAPI document in tests: which operations it documents, which routes the
 * app serves, and whether a real response is one the document describes (its status, required
 * headers and body, the body checked against the document's own JSON Schema).
 */

type ResponseDoc = {
  description: string;
  headers?: Record<string, { required?: boolean }>;
  content?: Record<string, { schema: unknown }>;
};
export type Operation = {
  operationId?: string;
  summary?: string;
  tags?: string[];
  security?: Record<string, string[]>[];
  parameters?: { in: string; name: string; required?: boolean; $ref?: string }[];
  responses: Record<string, ResponseDoc>;
};
export type OpenApiDocument = {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, Operation>>;
  components: {
    schemas?: Record<string, unknown>;
    securitySchemes?: Record<string, unknown>;
    parameters?: Record<string, unknown>;
  };
  security?: Record<string, string[]>[];
};

export const HTTP_METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

/** "GET /api/threads/{threadId}/messages" for every operation the document describes. */
export function documentedOperations(document: OpenApiDocument): string[] {
  return Object.entries(document.paths).flatMap(([path, item]) =>
    Object.keys(item)
      .filter((method) => HTTP_METHODS.includes(method))
      .map((method) => `${method.toUpperCase()} ${path}`),
  );
}

/**
 * "GET /api/threads/{threadId}/messages" for every route the app serves, read from Hono's route
 * table (middleware, registered for every method, is not a route).
 */
export function servedRoutes(app: { routes: { method: string; path: string }[] }): string[] {
  const routes = app.routes
    .filter((route) => route.method !== "ALL")
    .map(({ method, path }) => `${method} ${path.replace(/:(\w+)(\{[^}]*\})?\??/g, "{$1}")}`);
  return [...new Set(routes)];
}

/** The documented operation a request to `method path` reaches: its path template and description. */
export function operationFor(
  document: OpenApiDocument,
  method: string,
  url: string,
): { key: string; operation: Operation } {
  const { pathname } = new URL(url, "http://localhost");
  for (const [template, item] of Object.entries(document.paths)) {
    const pattern = new RegExp(`^${template.replace(/\{[^}]+\}/g, "[^/]+")}$`);
    const operation = item[method.toLowerCase()];
    if (pattern.test(pathname) && operation) return { key: `${method.toUpperCase()} ${template}`, operation };
  }
  throw new Error(`${method} ${pathname} is not documented`);
}

/**
 * A validator for a JSON Schema of the document, built by zod from the JSON Schema itself (so
 * it checks what the document says, not the zod schema it was generated from); references to
 * the document's components resolve.
 */
export function documentedSchema(document: OpenApiDocument, schema: unknown): z.ZodType {
  const local = (value: unknown) => JSON.parse(JSON.stringify(value).replaceAll('"#/components/schemas/', '"#/$defs/'));
  return z.fromJSONSchema(
    { ...local(schema), $defs: local(document.components.schemas ?? {}) },
    { defaultTarget: "draft-2020-12" },
  );
}

/**
 * Asserts that a response is one its operation documents: the status is listed, the documented
 * required headers are present, the media type is a documented one and a JSON body validates
 * against the documented schema. Returns the operation and status, for coverage.
 */
export async function expectDocumentedResponse(
  document: OpenApiDocument,
  method: string,
  url: string,
  response: Response,
): Promise<string> {
  const { key, operation } = operationFor(document, method, url);
  const documented = operation.responses[String(response.status)] ?? operation.responses.default;
  const body = await response.text();
  expect(
    documented,
    `${key} answered ${response.status}, which it does not document: ${body.slice(0, 300)}`,
  ).toBeDefined();
  for (const [name, header] of Object.entries(documented!.headers ?? {})) {
    if (header.required) expect(response.headers.get(name), `${key} ${response.status}: header ${name}`).not.toBeNull();
  }
  const media = documented!.content ?? {};
  if (Object.keys(media).length > 0) {
    const type = response.headers.get("content-type")?.split(";")[0]?.trim() ?? "";
    expect(Object.keys(media), `${key} ${response.status}: content type`).toContain(type);
    if (type === "application/json") {
      const checked = documentedSchema(document, media[type]!.schema).safeParse(JSON.parse(body));
      expect(
        checked.success ? [] : checked.error.issues,
        `${key} ${response.status}: body ${body.slice(0, 300)}`,
      ).toEqual([]);
    }
  }
  return `${key} ${response.status}`;
}
