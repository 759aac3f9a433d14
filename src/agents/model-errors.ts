import { Middleware } from "inngest";

/**
 * Keeps the model provider's reason on a failed inference.
 *
 * Inngest's server runs step.ai.infer itself. When the provider keeps answering non-2xx (or not
 * at all) past the step's retries, the server hands the function the step's error as
 * `{name: "AIGatewayError", message: "Error making AI request: unsuccessful status code: <n>",
 * stack: <provider body>, data: <provider body>}`, with `{"error":"Error making AI request"}` as
 * the body when the provider sent none (BRIEF.md's engine facts; test/engine-contract.test.ts).
 * The SDK's StepError keeps only the name and message, so the provider's words would be lost.
 *
 * Under INFERENCE=gateway a turn's inference attempt is a step.invoke of the model-inference
 * function, whose run fails with that same AIGatewayError; the server hands it to the invoking
 * step as it came (docs/engine.md).
 *
 * This middleware (fresh per request) keeps the raw step errors it is handed, and when an
 * inference step (or such an invoke) rejects, puts the status and the provider's body into the StepError's message;
 * the onFailure handler turns it into a readable, redacted cause (failure-message.ts). The error
 * stays the SDK's StepError, so Inngest treats the run exactly as before.
 */
export class ModelErrorMiddleware extends Middleware.BaseMiddleware {
  readonly id = "threadline/model-errors";
  private readonly rawErrors = new Map<string, unknown>();

  override transformFunctionInput(arg: Middleware.TransformFunctionInputArgs) {
    for (const [hashedId, memoized] of Object.entries(arg.steps)) {
      if (memoized.type === "error") this.rawErrors.set(hashedId, memoized.error);
    }
    // An inference's error reaches the run only memoized: a request with none has nothing to
    // rewrite, and leaves every step unwrapped (the SDK wraps each step, memoized ones included,
    // on every replay, for any middleware with a wrapStep).
    if (this.rawErrors.size > 0) this.wrapStep = this.keepModelReason;
    return arg;
  }

  private keepModelReason({ next, stepInfo }: Middleware.WrapStepArgs) {
    if (stepInfo.stepType !== "ai.infer" && stepInfo.stepType !== "invoke") return next();
    return next().catch(async (error: unknown) => {
      const raw: unknown = await this.rawErrors.get(stepInfo.hashedId);
      // An invoke is a model call when the invoked run failed with the gateway's error (a turn's inference attempt).
      const fromModel = stepInfo.stepType === "ai.infer" || isGatewayError(raw);
      if (error instanceof Error && raw !== undefined && fromModel) error.message = modelFailureMessage(raw);
      throw error;
    });
  }
}

const isGatewayError = (raw: unknown) =>
  typeof raw === "object" && raw !== null && (raw as { name?: unknown }).name === "AIGatewayError";

/** The server's text for an inference failure, and its body when the provider sent none. */
const GATEWAY_TEXT = "Error making AI request";
const GATEWAY_STATUS = /unsuccessful status code:?\s*(\d{3})/i;

export const NO_ANSWER_PREFIX = "The model request got no answer from the provider";

/**
 * What a failed inference's raw step error says, as a message describeFailure reads:
 * "The model provider answered HTTP <status>: <provider body>" when it answered, "… with an
 * empty body" when it answered without one, and the no-answer text only
 * when the server substituted its own body and named no status (a timeout, a refused connection).
 */
export function modelFailureMessage(raw: unknown): string {
  const error =
    typeof raw === "object" && raw !== null
      ? (raw as { message?: unknown; stack?: unknown; data?: unknown })
      : { message: raw };
  const message = typeof error.message === "string" ? error.message : "";
  const status = GATEWAY_STATUS.exec(message)?.[1];
  const body = [error.data, error.stack]
    .map((part) => (typeof part === "string" ? part : part === undefined ? undefined : JSON.stringify(part)))
    .find((part) => part?.trim());
  if (body !== undefined && !isSubstitutedBody(body))
    return `The model provider answered${status ? ` HTTP ${status}` : ""}: ${body.slice(0, 4_000)}`;
  if (status) return `The model provider answered HTTP ${status} with an empty body.`;
  if (body !== undefined || message.includes(GATEWAY_TEXT))
    return `${NO_ANSWER_PREFIX} (it timed out or could not connect).`;
  return message || "The model request failed without an error message.";
}

/** A status in a failure's text: the gateway's "status code: <n>", or "HTTP <n>" as the causes above put it. */
const FAILURE_STATUS = /\b(?:HTTP|status code:?)\s*([1-5]\d\d)\b/i;

/**
 * Whether another attempt of a failed inference may succeed: not when the provider refused the
 * request itself (a 4xx other than 408 timeout and 429 rate limit: a bad key, an unknown model,
 * a request too large), whatever else happened (5xx, no answer, a timeout) may pass.
 */
export function isRetriableModelFailure(message: string): boolean {
  const status = Number(FAILURE_STATUS.exec(message)?.[1]);
  return !(status >= 400 && status < 500 && status !== 408 && status !== 429);
}

/** The body the server puts in place of an empty provider answer. */
function isSubstitutedBody(body: string): boolean {
  try {
    const parsed = JSON.parse(body) as unknown;
    return (
      typeof parsed === "object" &&
      parsed !== null &&
      (parsed as { error?: unknown }).error === GATEWAY_TEXT &&
      Object.keys(parsed).length === 1
    );
  } catch {
    return false;
  }
}
