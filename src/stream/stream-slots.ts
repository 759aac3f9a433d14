/**
 * Fair shares of the live streams one process holds (event streams and useChat's UI streams): at
 * most `perUser` open streams per user and `perProcess` in all. A stream takes a slot before it
 * starts and gives it back when it ends; a request beyond either cap is refused (429 with
 * Retry-After), so one user's open streams cannot starve the others of the process.
 */
export type StreamLimits = { perUser: number; perProcess: number };

/** Defaults (STREAM_MAX_PER_USER, STREAM_MAX_PER_PROCESS): a few browser tabs per user; far below what the pool and memory bear. */
export const DEFAULT_STREAM_LIMITS: StreamLimits = { perUser: 16, perProcess: 1_000 };

/** What a refused stream is told to wait before trying again, in seconds. */
export const STREAM_RETRY_AFTER_SECONDS = 5;

export type StreamSlots = {
  /** A slot for the user's new stream (call release once it ends), or which cap refused it. */
  acquire: (userId: string) => { release: () => void } | { refused: "user" | "process" };
  /** Streams open now: in all, and of one user. */
  open: (userId?: string) => number;
};

export function createStreamSlots(limits: StreamLimits = DEFAULT_STREAM_LIMITS): StreamSlots {
  const perUser = new Map<string, number>();
  let total = 0;
  return {
    acquire(userId) {
      if (total >= limits.perProcess) return { refused: "process" };
      const mine = perUser.get(userId) ?? 0;
      if (mine >= limits.perUser) return { refused: "user" };
      perUser.set(userId, mine + 1);
      total += 1;
      let released = false;
      return {
        release: () => {
          if (released) return;
          released = true;
          total -= 1;
          const left = (perUser.get(userId) ?? 1) - 1;
          if (left === 0) perUser.delete(userId);
          else perUser.set(userId, left);
        },
      };
    },
    open: (userId) => (userId === undefined ? total : (perUser.get(userId) ?? 0)),
  };
}
