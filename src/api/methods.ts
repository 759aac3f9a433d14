import type { Context, MiddlewareHandler } from "hono";
import { TrieRouter } from "hono/router/trie-router";

/** The order Allow lists methods in (any other after these). */
const METHOD_ORDER = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];
const rank = (method: string) => {
  const index = METHOD_ORDER.indexOf(method);
  return index === -1 ? METHOD_ORDER.length : index;
};

/** Hono's route table: a route registered for one method; middleware is registered for "ALL". */
type RouteTable = { routes: readonly { method: string; path: string }[] };

/**
 * The methods a path takes, read from the routes `app` has registered, so they cannot drift from
 * what it serves; none for a path no route matches. HEAD comes with GET: Hono answers it with the
 * GET route. The table is built on the first request, when every route is registered.
 */
export function allowedMethods(app: RouteTable): (path: string) => string[] {
  let router: TrieRouter<string> | undefined;
  const build = () => {
    const table = new TrieRouter<string>();
    // Each route's method is what a match yields, whatever the request's method.
    for (const { method, path } of app.routes) if (method !== "ALL") table.add("ALL", path, method);
    return table;
  };
  return (path) => {
    router ??= build();
    const methods = new Set(router.match("GET", path)[0].map(([method]) => method));
    if (methods.has("GET")) methods.add("HEAD");
    return [...methods].sort((a, b) => rank(a) - rank(b));
  };
}

/**
 * 405 for a path that exists but not for this method, with Allow naming those it takes: a 404
 * would tell a client the path does not exist. The methods are public (/openapi.json lists them),
 * so this runs before authentication.
 */
export function refuseOtherMethods(allowed: (path: string) => string[]): MiddlewareHandler {
  return async (c, next) => methodNotAllowed(c, allowed(c.req.path)) ?? next();
}

/** The 405 answer when `methods` (the path's) are some and exclude the request's; else undefined. */
export function methodNotAllowed(c: Context, methods: string[]) {
  const { method, path } = c.req;
  if (methods.length === 0 || methods.includes(method)) return undefined;
  const allow = methods.join(", ");
  c.header("Allow", allow);
  return c.json(
    {
      error: `${method} ${path} is not allowed: this path takes ${allow}. See /docs (the API reference) or /openapi.json.`,
      code: "method_not_allowed" as const,
    },
    405,
  );
}
