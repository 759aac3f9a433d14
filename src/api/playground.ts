import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { Hono } from "hono";
import { describeRoute } from "hono-openapi";
import { z } from "zod";
import { describeModel, MODEL_NOT_CONFIGURED, type ModelChoice } from "../agents/model.js";
import type { AuthEnv } from "../auth/identity.js";
import type { AppEnv } from "./errors.js";
import { apiErrors, jsonResponse } from "./openapi.js";

const JS = "text/javascript; charset=utf-8";
const require = createRequire(import.meta.url);

/**
 * The playground's files: plain modules the browser loads as they are (no build step), next to
 * this module's directory in src/ and, copied by `npm run build`, in dist/src/; and the two
 * libraries it renders answers with, served from node_modules as their packages ship them (pinned
 * in package.json), so the page needs no CDN and its CSP stays 'self'.
 */
export const PLAYGROUND_FILES = [
  { path: "/", file: "index.html", operationId: "getPlayground", type: "text/html; charset=utf-8" },
  {
    path: "/playground/style.css",
    file: "style.css",
    operationId: "getPlaygroundStyle",
    type: "text/css; charset=utf-8",
  },
  { path: "/playground/app.js", file: "app.js", operationId: "getPlaygroundApp", type: JS },
  { path: "/playground/api.js", file: "api.js", operationId: "getPlaygroundApi", type: JS },
  { path: "/playground/session.js", file: "session.js", operationId: "getPlaygroundSession", type: JS },
  { path: "/playground/event-stream.js", file: "event-stream.js", operationId: "getPlaygroundEventStream", type: JS },
  { path: "/playground/deltas.js", file: "deltas.js", operationId: "getPlaygroundDeltas", type: JS },
  { path: "/playground/render.js", file: "render.js", operationId: "getPlaygroundRender", type: JS },
  { path: "/playground/markdown.js", file: "markdown.js", operationId: "getPlaygroundMarkdown", type: JS },
  { path: "/playground/feedback.js", file: "feedback.js", operationId: "getPlaygroundFeedback", type: JS },
  { path: "/playground/usage.js", file: "usage.js", operationId: "getPlaygroundUsage", type: JS },
  { path: "/playground/approvals.js", file: "approvals.js", operationId: "getPlaygroundApprovals", type: JS },
  // marked's ES module build (its package's main entry) and DOMPurify's (beside its CommonJS entry).
  {
    path: "/playground/vendor/marked.js",
    file: require.resolve("marked"),
    operationId: "getPlaygroundMarked",
    type: JS,
  },
  {
    path: "/playground/vendor/purify.js",
    file: path.join(path.dirname(require.resolve("dompurify")), "purify.es.mjs"),
    operationId: "getPlaygroundPurify",
    type: JS,
  },
] as const;

/**
 * Scripts and styles only from this origin, and nothing inline: the page runs no script it did
 * not load from its own files, whatever a message's text holds.
 */
const PLAYGROUND_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const directory = new URL("../playground/", import.meta.url);

/** A source map comment would make a browser's developer tools ask for a file that is not served. */
const withoutSourceMap = (body: string) => body.replace(/\n\/\/# sourceMappingURL=\S+\s*$/, "\n");

/** GET / and GET /playground/*: the playground page and its files, public (the page asks for credentials itself). */
export function playgroundRoutes() {
  const app = new Hono<AppEnv>();
  for (const { path: route, file, operationId, type } of PLAYGROUND_FILES) {
    const body = withoutSourceMap(readFileSync(path.isAbsolute(file) ? file : new URL(file, directory), "utf8"));
    const name = path.basename(route === "/" ? file : route);
    const mediaType = type.split(";")[0]!;
    app.get(
      route,
      describeRoute({
        operationId,
        tags: ["Playground"],
        summary:
          route === "/"
            ? "The playground: a page to chat with Threadline through this API"
            : `The playground's ${name}`,
        security: [],
        responses: {
          200: { description: `The playground's ${name}.`, content: { [mediaType]: { schema: { type: "string" } } } },
        },
      }),
      (c) => {
        c.header("content-type", type);
        c.header("cache-control", "no-cache");
        c.header("x-content-type-options", "nosniff");
        if (file === "index.html") c.header("content-security-policy", PLAYGROUND_CSP);
        return c.body(body);
      },
    );
  }
  return app;
}

/** What answers chat turns here, as GET /api/info tells a signed-in client (the playground shows it). */
export type ServiceInfo = { model: ModelChoice; inference: "gateway" | "stream" };

const serviceInfoResponse = z.object({
  model: z
    .discriminatedUnion("configured", [
      z.object({
        configured: z.literal(true),
        provider: z
          .enum(["openai", "anthropic", "gemini"])
          .meta({ description: "The API format (openai: any OpenAI-compatible server)." }),
        name: z.string(),
        source: z.enum(["environment", "ollama"]).meta({
          description: "environment: configured; ollama: none was, and development start-up found a local Ollama.",
        }),
      }),
      z.object({
        configured: z.literal(false),
        problem: z.string().meta({ description: "Why turns fail until a model is configured." }),
        setup: z.array(z.string()).meta({ description: "How to configure one, step by step." }),
      }),
    ])
    .meta({ description: "The model that answers chat turns, or how to configure one." }),
  inference: z.enum(["gateway", "stream"]).meta({
    description:
      "gateway: the Inngest server calls the model (step.ai.infer); stream: this process does, streaming the text to the event log.",
  }),
});

const notConfigured: ServiceInfo = { model: { configured: false, reason: MODEL_NOT_CONFIGURED }, inference: "gateway" };

/** GET /api/info: the model and inference mode, for a signed-in caller (not public: it names the provider). */
export function serviceInfoRoutes(info: ServiceInfo = notConfigured) {
  const answer = { model: describeModel(info.model), inference: info.inference } satisfies z.infer<
    typeof serviceInfoResponse
  >;
  return new Hono<AuthEnv>().get(
    "/",
    describeRoute({
      operationId: "getServiceInfo",
      tags: ["Service"],
      summary: "The model that answers chat turns (or how to configure one) and the inference mode",
      responses: { 200: jsonResponse("What answers chat turns.", serviceInfoResponse), ...apiErrors() },
    }),
    (c) => c.json(answer),
  );
}
