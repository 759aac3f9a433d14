import type pg from "pg";

/**
 * The real pool, with every query text it runs recorded (on the pool and on clients checked out
 * of it), so a test can assert which queries a run issued. `onQuery` also sees each text as it is
 * sent (to attribute it to the step running it); a function it returns is called once the query settles.
 */
export function countingPool(
  pool: pg.Pool,
  onQuery?: (text: string) => (() => void) | undefined,
): { pool: pg.Pool; queries: string[] } {
  const queries: string[] = [];
  const recording = <T extends object>(target: T): T =>
    new Proxy(target, {
      get(object, property) {
        const value = Reflect.get(object, property) as unknown;
        if (typeof value !== "function") return value;
        if (property === "query") {
          return (...args: unknown[]) => {
            const text = args[0];
            const queryText = typeof text === "string" ? text : (text as { text: string }).text;
            queries.push(queryText);
            const settled = onQuery?.(queryText);
            const result = (value as (...a: unknown[]) => unknown).apply(object, args);
            if (settled) void Promise.resolve(result).then(settled, settled);
            return result;
          };
        }
        if (property === "connect") {
          return async () => recording(await (value as () => Promise<pg.PoolClient>).apply(object));
        }
        return (value as (...a: unknown[]) => unknown).bind(object);
      },
    });
  return { pool: recording(pool), queries };
}
