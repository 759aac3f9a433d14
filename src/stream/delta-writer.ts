import type pg from "pg";
import { appendRunEvents, type NewEvent } from "../history/events.js";
import type { InferenceDelta } from "../history/thread-log.js";

/** Longest a piece of streamed text waits before it is written: a reader sees it about this late. */
const DELTA_FLUSH_MS = 50;

/** Text at which a batch is written at once, however young: a fast model still gets steady rows. */
export const DELTA_FLUSH_CHARS = 1_000;

/**
 * Writes one inference attempt's streamed text to the thread's event log as `text.delta` rows,
 * in batches: the attempt's first piece is written at once (a reader sees the answer start as soon
 * as the provider sends it), then a batch is written DELTA_FLUSH_MS after its first piece arrived,
 * or as soon as it holds DELTA_FLUSH_CHARS, so a long answer costs a statement per batch, not per
 * token. Batches
 * are written one after the other (their ids follow the text's order), each keyed
 * `<stepId>:delta:<n>` under the step's attempt: the same attempt run again writes nothing twice.
 *
 * `finish()` writes what is left and waits for every batch; a failed write fails it (the step
 * then fails and is retried), so no text is silently missing from the log. A failed write is also
 * reported to `onFailure` at once, so the caller can stop the model instead of letting it answer
 * to the end for nothing (nothing after the failed batch is written). A stream that broke off is
 * finished too: its text so far is logged, and the retry's attempt supersedes it.
 *
 * Once the run's turn has ended (the user stopped it: the stop stored the text logged before it as
 * the answer; or it was cancelled or failed), a batch is refused (appendRunEvents), nothing more is
 * written, and `ended` aborts, so the caller stops reading the model.
 */
export function deltaWriter(
  db: pg.Pool,
  target: { threadId: string; runId: string; stepId: string; attempt: number },
  onFailure: (error: unknown) => void,
) {
  let pending = "";
  let batches = 0;
  let timer: NodeJS.Timeout | undefined;
  let writing: Promise<void> = Promise.resolve();
  const stop = new AbortController();

  const flush = () => {
    clearTimeout(timer);
    timer = undefined;
    if (pending === "" || stop.signal.aborted) return;
    const data: InferenceDelta = {
      runId: target.runId,
      stepId: target.stepId,
      attempt: target.attempt,
      delta: pending,
    };
    const events: NewEvent[] = [{ key: `${target.stepId}:delta:${batches}`, event: "text.delta", data }];
    pending = "";
    batches += 1;
    writing = writing.then(async () => {
      if (stop.signal.aborted) return;
      const { ended } = await appendRunEvents(db, {
        threadId: target.threadId,
        runId: target.runId,
        attempt: target.attempt,
        events,
      });
      if (ended) stop.abort();
    });
    // Reported now, and again by finish(): the rejection is handled here, so it never counts as unhandled.
    writing.catch(onFailure);
  };

  return {
    /** Aborts once a batch found the turn ended: stopped by the user, cancelled or failed. */
    ended: stop.signal,
    push: (text: string) => {
      pending += text;
      if (batches === 0 || pending.length >= DELTA_FLUSH_CHARS) flush();
      else timer ??= setTimeout(flush, DELTA_FLUSH_MS);
    },
    finish: async () => {
      flush();
      await writing;
    },
  };
}
