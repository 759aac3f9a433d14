import { readFileSync } from "node:fs";
import { Hono } from "hono";
import { describeRoute } from "hono-openapi";
import type { AppEnv } from "./errors.js";

/**
 * The playground's files: plain modules the browser loads as they are (no build step), next to
 * this module's directory in src/ and, copied by `npm run build`, in dist/src/.
 */
export const PLAYGROUND_FILES = [
  { path: "/", file: "index.html", operationId: "getPlayground", type: "text/html; charset=utf-8" },
  { path: "/playground/style.css", file: "style.css", operationId: "getPlaygroundStyle", type: "text/css; charset=utf-8" },
  { path: "/playground/app.js", file: "app.js", operationId: "getPlaygroundApp", type: "text/javascript; charset=utf-8" },
  { path: "/playground/api.js", file: "api.js", operationId: "getPlaygroundApi", type: "text/javascript; charset=utf-8" },
  { path: "/playground/session.js", file: "session.js", operationId: "getPlaygroundSession", type: "text/javascript; charset=utf-8" },
  { path: "/playground/event-stream.js", file: "event-stream.js", operationId: "getPlaygroundEventStream", type: "text/javascript; charset=utf-8" },
  { path: "/playground/deltas.js", file: "deltas.js", operationId: "getPlaygroundDeltas", type: "text/javascript; charset=utf-8" },
  { path: "/playground/render.js", file: "render.js", operationId: "getPlaygroundRender", type: "text/javascript; charset=utf-8" },
] as const;

/**
 * Scripts and styles only from this origin, and nothing inline: the page runs no script it did
 * not load from its own files, whatever a message's text holds.
 */
export const PLAYGROUND_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const directory = new URL("../playground/", import.meta.url);

/** GET / and GET /playground/*: the playground page and its files, public (the page asks for credentials itself). */
export function playgroundRoutes() {
  const app = new Hono<AppEnv>();
  for (const { path, file, operationId, type } of PLAYGROUND_FILES) {
    const body = readFileSync(new URL(file, directory), "utf8");
    const mediaType = type.split(";")[0]!;
    app.get(
      path,
      describeRoute({
        operationId,
        tags: ["Playground"],
        summary: path === "/" ? "The playground: a page to chat with Threadline through this API" : `The playground's ${file}`,
        security: [],
        responses: { 200: { description: `The playground's ${file}.`, content: { [mediaType]: { schema: { type: "string" } } } } },
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
