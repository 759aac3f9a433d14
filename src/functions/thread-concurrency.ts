/**
 * One turn per thread at a time, shared by every function that writes a turn (chat turns and
 * regenerates): scope "env" makes runs of different functions with the same key value queue
 * behind each other, and the "thread:" prefix keeps the key apart from other env-wide keys.
 * `threadIdExpression` is the CEL expression that yields the thread id from the event.
 */
export const threadConcurrency = (threadIdExpression: string) => ({
  scope: "env" as const,
  key: `"thread:" + (${threadIdExpression})`,
  limit: 1,
});
