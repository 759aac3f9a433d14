import { invoke, NonRetriableError } from "inngest";
import { z } from "zod";
import { inngest } from "../../inngest.config.js";
import type { ModelChoice } from "../agents/model.js";

/*
 * One model call of a turn under INFERENCE=gateway, as a function of its own that a turn invokes
 * (step.invoke) for each attempt of an inference. The Inngest server retries a step.ai.infer as
 * often as its function's `retries` say, before it hands the function the last error; here that is
 * none, so each attempt is one provider call and its failure reaches the turn at once, which
 * shows it (turn.retrying) and decides on the next attempt (streaming-inference.ts).
 */

const MODEL_INFERENCE_ID = "model-inference";

/**
 * What a turn hands the inference: the request body AgentKit built. The model, its URL and its key
 * come from this process's configuration, never from the invocation (invoke data is stored and
 * shown by the Inngest server like any event).
 */
const inferenceRequest = z.object({ body: z.record(z.string(), z.unknown()) });

/**
 * Invoked only: its trigger is Inngest's `inngest/function.invoked`, which the server sends to the
 * function a step.invoke names and nobody else sends. It returns what step.ai.infer returned (the
 * provider's answer), so the turn's AgentKit reads it as before; a failure ends the run with the
 * server's AIGatewayError as it came, which the invoking step throws.
 */
export function createModelInference({ model }: { model: ModelChoice }) {
  return inngest.createFunction(
    { id: MODEL_INFERENCE_ID, name: "Model inference (one attempt)", triggers: [invoke(inferenceRequest)], retries: 0 },
    async ({ event, step }) => {
      if (!model.configured) throw new NonRetriableError(model.reason);
      const infer = step.ai.infer as unknown as (
        id: string,
        input: { model: unknown; body: unknown },
      ) => Promise<unknown>;
      return infer("inference", { model: model.model, body: event.data.body });
    },
  );
}

/** The function a turn invokes for its inferences: step.invoke names it by id, so this is the one served. */
export type ModelInference = ReturnType<typeof createModelInference>;
