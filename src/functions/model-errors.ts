import { Middleware } from "inngest";

/**
 * Keeps the model provider's reason on a failed inference.
 *
 * Inngest's server runs step.ai.infer itself. When the provider keeps answering non-2xx (or not
 * at all) past the step's retries, the server hands the function the provider's body as the
 * step's error — e.g. OpenAI's `{"error":{"message":…,"type":…}}` — or `{"error":"Error making AI
 * request"}` when no answer came. The SDK only reads `name`/`message` strings from a step error,
 * so it throws a StepError that says "Unknown error", and that is what the failed turn recorded.
 *
 * This middleware (fresh per request) keeps the raw step errors it is handed, and when an
 * inference step rejects, puts the raw body into the StepError's message; the onFailure handler
 * turns it into a readable, redacted cause (failure-message.ts). The error stays the SDK's
 * StepError, so Inngest treats the run exactly as before.
 */
export class ModelErrorMiddleware extends Middleware.BaseMiddleware {
  readonly id = "threadline/model-errors";
  private readonly rawErrors = new Map<string, unknown>();

  override transformFunctionInput(arg: Middleware.TransformFunctionInputArgs) {
    for (const [hashedId, memoized] of Object.entries(arg.steps)) {
      if (memoized.type === "error") this.rawErrors.set(hashedId, memoized.error);
    }
    return arg;
  }

  override wrapStep({ next, stepInfo }: Middleware.WrapStepArgs) {
    if (stepInfo.stepType !== "ai.infer") return next();
    return next().catch(async (error: unknown) => {
      const raw: unknown = await this.rawErrors.get(stepInfo.hashedId);
      if (error instanceof Error && raw !== undefined) error.message = modelFailureMessage(raw);
      throw error;
    });
  }
}

/** The server's fixed text for an inference that got no answer (timeout, connection refused). */
const NO_ANSWER = "Error making AI request";

export const NO_ANSWER_PREFIX = "The model request got no answer from the provider";

/** What a failed inference's raw step error says, as a message describeFailure can read. */
export function modelFailureMessage(raw: unknown): string {
  const body = typeof raw === "string" ? raw : JSON.stringify(raw);
  if (body.includes(NO_ANSWER)) return `${NO_ANSWER_PREFIX} (it timed out or could not connect).`;
  return `Model request failed: ${body.slice(0, 4_000)}`;
}
