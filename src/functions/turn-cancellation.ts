import { inngest } from "../../inngest.config.js";
import { cancelTurn } from "../history/turns.js";
import { CHAT_TURN_ID, type FunctionDeps } from "./chat-turn.js";
import { REGENERATE_ID } from "./regenerate.js";
import { announceTurnFinished } from "./turn-finished.js";

/** Inngest names a function `<app id>-<function id>` in its lifecycle events. */
const turnFunctionIds = [CHAT_TURN_ID, REGENERATE_ID].map((id) => `${inngest.id}-${id}`);

/**
 * Inngest calls no onFailure for a cancelled run, so without this its turn would stay running and
 * every later turn of the thread would wait for it. Records the turn as cancelled and releases
 * the thread at once. A run cancelled after its turn finished changes nothing.
 */
export function createTurnCancellation({ db }: Pick<FunctionDeps, "db">) {
  return inngest.createFunction(
    {
      id: "turn-cancelled",
      name: "Record a cancelled turn",
      triggers: [
        {
          event: "inngest/function.cancelled",
          if: turnFunctionIds.map((id) => `event.data.function_id == ${JSON.stringify(id)}`).join(" || "),
        },
      ],
      retries: 4,
    },
    async ({ event, step }) => {
      const runId = String(event.data.run_id);
      const turn = await step.run("turn.record-cancelled", () => cancelTurn(db, runId));
      if (!turn) return { runId, status: "no running turn" as const };
      await announceTurnFinished(step, { ...turn, runId, status: "cancelled" });
      return { runId, status: "cancelled" as const, ...turn };
    },
  );
}
