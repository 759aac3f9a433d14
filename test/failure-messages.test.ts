import { StepError, type Middleware } from "inngest";
import { describe, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { describeFailure, MAX_FAILURE_MESSAGE } from "../src/functions/failure-message.js";
import { ModelErrorMiddleware } from "../src/functions/model-errors.js";
import { inngest } from "../inngest.config.js";
import { execute, executeFailureHandler, MODEL_TIMEOUT_MS } from "./helpers/engine.js";
import { chatEvent, scriptedModel, turnsOf } from "./helpers/fixtures.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

/** Runs a chat turn whose model fails, then its onFailure handler as Inngest would; returns the recorded turn. */
async function failedTurn() {
  const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
  const event = chatEvent({ content: "Are you there?" });
  const run = await execute(chatTurn, event);
  expect(run.error).toBeDefined();
  const { name, message } = run.error as Error;
  const failure = await executeFailureHandler(chatTurn, { runId: run.runId, event, error: { name, message } });
  const [turn] = await turnsOf(bed.db.pool, event.data.messageId);
  return { turn: turn!, event, failure, run };
}

describe("a failed turn records a readable cause", () => {
  it("the provider's HTTP status and message when the model answers 500 with an error body", async () => {
    bed.model.script({
      status: 500,
      body: { error: { message: "The server had an error while processing your request. Sorry about that!", type: "server_error" } },
    });
    const { turn, event, failure, run } = await failedTurn();
    expect(turn).toMatchObject({
      status: "failed",
      error: "The model provider answered HTTP 500: The server had an error while processing your request. Sorry about that! (server_error)",
    });
    // The thread is released: a later turn waiting for this run gets its finished event.
    expect(failure.sentEvents).toEqual([
      expect.objectContaining({
        name: "threadline/turn.finished",
        data: { threadId: event.data.messageId, runId: run.runId, messageId: event.data.messageId, status: "failed" },
      }),
    ]);
  });

  it("a timeout when the model does not answer in time", async () => {
    bed.model.script({ text: "Too late.", delayMs: MODEL_TIMEOUT_MS + 500 });
    const { turn } = await failedTurn();
    expect(turn.status).toBe("failed");
    expect(turn.error).toMatch(/^The model or a step did not answer in time: .*timeout/i);
  });

  it("without credentials, and at most MAX_FAILURE_MESSAGE characters", async () => {
    bed.model.script({
      status: 401,
      body: { error: { message: `Incorrect API key provided: sk-proj-AbCdEf0123456789XyZ. Sent as Authorization: Bearer sk-proj-AbCdEf0123456789XyZ ${"padding ".repeat(80)}`, type: "invalid_request_error", code: "invalid_api_key" } },
    });
    const { turn } = await failedTurn();
    expect(turn.error).toMatch(/^The model provider answered HTTP 401: Incorrect API key provided: sk-\[redacted\]/);
    expect(turn.error).not.toMatch(/AbCdEf0123456789/);
    expect(turn.error!.length).toBeLessThanOrEqual(MAX_FAILURE_MESSAGE);
  });
});

describe("describeFailure", () => {
  it("reads the error bodies of Anthropic and Gemini, and plain messages", () => {
    expect(describeFailure({ message: 'HTTP 529: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}' })).toBe(
      "The model provider answered HTTP 529: Overloaded (overloaded_error)",
    );
    expect(describeFailure({ message: 'HTTP 400: {"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT"}}' })).toBe(
      "The model provider answered HTTP 400: API key not valid. (400)",
    );
    expect(describeFailure({ name: "NonRetriableError", message: "No model is configured." })).toBe("No model is configured.");
    expect(describeFailure({ name: "Error", message: "" })).toBe("Error");
  });

  it("redacts bearer tokens, API keys and keys in URLs", () => {
    const text = describeFailure({
      message: "request to https://generativelanguage.googleapis.com/v1/models?key=AIzaSyA1234567890abcdefghijkl failed; authorization: Bearer abc.def.ghi; x-api-key: sk-ant-api03-secretsecret",
    });
    expect(text).not.toMatch(/AIzaSyA1234567890|abc\.def\.ghi|secretsecret/);
    expect(text).toMatch(/key=\[redacted\]/);
  });
});

describe("under Inngest's server, a failed inference", () => {
  // What the server hands the SDK once step.ai.infer has used its retries: the provider's body
  // (or its own text when no answer came) as the step's error. The SDK alone reads "Unknown error"
  // from the first, and a text that does not say why from the second.
  const serverStepErrors = {
    providerBody: { error: { message: "The server had an error while processing your request.", type: "server_error" } },
    noAnswer: { error: "Error making AI request" },
  };

  async function throughMiddleware(raw: unknown, sdkMessage: string) {
    const middleware = new ModelErrorMiddleware({ client: inngest });
    await middleware.transformFunctionInput({ steps: { hashed: { type: "error", error: raw } } } as unknown as Middleware.TransformFunctionInputArgs);
    const stepError = new StepError("assistant", raw);
    expect(stepError.message).toBe(sdkMessage);
    const wrapped = middleware.wrapStep({ next: () => Promise.reject(stepError), stepInfo: { hashedId: "hashed", stepType: "ai.infer" } } as unknown as Middleware.WrapStepArgs);
    const error = await wrapped.then(() => undefined, (e: unknown) => e as Error);
    expect(error).toBe(stepError);
    return describeFailure(error!);
  }

  it("keeps the provider's reason instead of 'Unknown error'", async () => {
    expect(await throughMiddleware(serverStepErrors.providerBody, "Unknown error")).toBe(
      "The model provider answered with an error: The server had an error while processing your request. (server_error)",
    );
  });

  it("says the provider gave no answer when the request timed out or could not connect", async () => {
    expect(await throughMiddleware(serverStepErrors.noAnswer, "Error making AI request")).toBe("The model request got no answer from the provider (it timed out or could not connect).");
  });
});
