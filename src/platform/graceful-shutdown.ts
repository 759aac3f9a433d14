import type { Server } from "node:http";

/**
 * Graceful shutdown for an HTTP server: `drain` stops accepting connections, lets the requests in
 * flight finish, and closes each keep-alive connection as soon as it is idle (a client would
 * otherwise hold it open for its keep-alive time). Resolves true when every request was answered,
 * false when the timeout came first and the remaining connections were cut.
 */
export function drainable(server: Server): { drain: (timeoutMs: number) => Promise<boolean> } {
  let draining = false;
  server.on("request", (_request, response) => {
    response.on("close", () => {
      if (draining) setImmediate(() => server.closeIdleConnections());
    });
  });
  return {
    drain: (timeoutMs) =>
      new Promise((resolve) => {
        draining = true;
        const timer = setTimeout(() => {
          server.closeAllConnections();
          resolve(false);
        }, timeoutMs);
        server.close(() => {
          clearTimeout(timer);
          resolve(true);
        });
      }),
  };
}
