import type { InngestFunction } from "inngest";
import type { SentEvent } from "./engine.js";

type CancelOn = { event: string | { name: string }; if?: string };

/**
 * Whether `sent` cancels a run of `fn` started by `trigger`, by the function's own cancelOn as
 * Inngest evaluates it (engine fact: cancelOn behaves as documented, BRIEF.md): an entry matches
 * an event of its name whose `if` holds, `async` being the cancelling event and `event` the run's
 * trigger. Only the expressions Threadline writes are understood — `==` comparisons of
 * `async.data.<field>` and `event.data.<field>` joined by `&&` — and a field the event lacks makes
 * its comparison false (CEL fails it, and a failed expression cancels nothing).
 */
export function cancels(fn: InngestFunction.Like, trigger: SentEvent, sent: SentEvent): boolean {
  const entries = (fn as unknown as { opts: { cancelOn?: CancelOn[] } }).opts.cancelOn ?? [];
  return entries.some((entry) => {
    const name = typeof entry.event === "string" ? entry.event : entry.event.name;
    if (name !== sent.name) return false;
    if (!entry.if) return true;
    return entry.if.split("&&").every((clause) => {
      const sides = clause.split("==").map((side) => side.trim());
      if (sides.length !== 2) throw new Error(`unsupported cancelOn expression in tests: ${entry.if}`);
      const [left, right] = sides.map((side) => sideValue(side, { async: sent, event: trigger }, entry.if!));
      return left !== undefined && right !== undefined && left === right;
    });
  });
}

function sideValue(side: string, events: { async: SentEvent; event: SentEvent }, expression: string): unknown {
  const [, which, field] = /^(async|event)\.data\.(\w+)$/.exec(side) ?? [];
  if (!which) throw new Error(`unsupported cancelOn expression in tests: ${expression}`);
  return events[which as "async" | "event"].data[field!];
}
