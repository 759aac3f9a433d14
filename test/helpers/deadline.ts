/**
 * Bounded waits on conditions, for tests of what must end (a stream, a run): generous deadlines,
 * since the machine may be loaded; a test fails at one only when the awaited thing never comes.
 */
const DEADLINE_MS = 15_000;

/** Rejects after `ms` unless `promise` settled first: what the test waits for, named. */
export const within = <T>(promise: Promise<T>, what: string, ms = DEADLINE_MS) => {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not within ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
};

/** Waits until `done()` holds, looking every 10 ms, at most `ms`. */
export async function until(done: () => boolean, what: string, ms = DEADLINE_MS) {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
