import { serializeError, StepError, type Middleware } from "inngest";
import { describe, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createModelInference } from "../src/functions/model-inference.js";
import { TURN_RETRIES } from "../src/functions/turn-lifecycle.js";
import { describeFailure, MAX_FAILURE_MESSAGE } from "../src/functions/failure-message.js";
import { ModelErrorMiddleware } from "../src/agents/model-errors.js";
import { inngest } from "../inngest.config.js";
import { execute, executeFailureHandler, MODEL_TIMEOUT_MS } from "./helpers/engine.js";
import { chatEvent, scriptedModel, turnsOf } from "./helpers/fixtures.js";
import { aiGatewayError } from "./helpers/engine-stand-in.js";
import { startLiveEngine } from "./helpers/live-engine.js";
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
      body: {
        error: {
          message: "The server had an error while processing your request. Sorry about that!",
          type: "server_error",
        },
      },
    });
    const { turn, event, failure, run } = await failedTurn();
    expect(turn).toMatchObject({
      status: "failed",
      error:
        "The model provider answered HTTP 500: The server had an error while processing your request. Sorry about that! (server_error)",
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
      body: {
        error: {
          message: `Incorrect API key provided: sk-proj-AbCdEf0123456789XyZ. Sent as Authorization: Bearer sk-proj-AbCdEf0123456789XyZ ${"padding ".repeat(80)}`,
          type: "invalid_request_error",
          code: "invalid_api_key",
        },
      },
    });
    const { turn } = await failedTurn();
    expect(turn.error).toMatch(/^The model provider answered HTTP 401: Incorrect API key provided: sk-\[redacted\]/);
    expect(turn.error).not.toMatch(/AbCdEf0123456789/);
    expect(turn.error!.length).toBeLessThanOrEqual(MAX_FAILURE_MESSAGE);
  });

  it("cut before an emoji it would split, not through it (no U+FFFD in the stored text)", async () => {
    const prefix = "The model provider answered HTTP 400: ";
    const before = "x".repeat(MAX_FAILURE_MESSAGE - 2 - prefix.length);
    bed.model.script({ status: 400, body: { error: { message: `${before}\u{1F600} and the rest` } } });
    const { turn } = await failedTurn();
    expect(turn.status).toBe("failed");
    expect(turn.error).toBe(`${prefix}${before}…`);
  });
});

describe("describeFailure", () => {
  it("reads the error bodies of Anthropic and Gemini, and plain messages", () => {
    expect(
      describeFailure({
        message: 'HTTP 529: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
      }),
    ).toBe("The model provider answered HTTP 529: Overloaded (overloaded_error)");
    expect(
      describeFailure({
        message: 'HTTP 400: {"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT"}}',
      }),
    ).toBe("The model provider answered HTTP 400: API key not valid. (400, INVALID_ARGUMENT)");
    expect(describeFailure({ name: "NonRetriableError", message: "No model is configured." })).toBe(
      "No model is configured.",
    );
    expect(describeFailure({ name: "Error", message: "" })).toBe("Error");
  });

  it("redacts bearer tokens, API keys and keys in URLs", () => {
    const text = describeFailure({
      message:
        "request to https://generativelanguage.googleapis.com/v1/models?key=AIzaSyA1234567890abcdefghijkl failed; authorization: Bearer abc.def.ghi; x-api-key: sk-ant-api03-secretsecret",
    });
    expect(text).not.toMatch(/AIzaSyA1234567890|abc\.def\.ghi|secretsecret/);
    expect(text).toMatch(/key=\[redacted\]/);
  });
});

describe("under Inngest's server, a failed inference", () => {
  // Exactly what the server hands the SDK once step.ai.infer has used its retries (BRIEF.md's
  // engine facts, pinned in test/engine-contract.test.ts): the status in the message, the
  // provider's body in stack and data, the server's own body when the provider sent none.
  const providers = [
    {
      provider: "OpenAI",
      status: 500,
      body: '{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}',
      cause:
        "The model provider answered HTTP 500: The server had an error while processing your request. Sorry about that! (server_error)",
    },
    {
      provider: "Anthropic",
      status: 529,
      body: '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
      cause: "The model provider answered HTTP 529: Overloaded (overloaded_error)",
    },
    {
      provider: "Gemini",
      status: 503,
      body: '{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}',
      cause:
        "The model provider answered HTTP 503: The model is overloaded. Please try again later. (503, UNAVAILABLE)",
    },
  ];

  /**
   * A failed step (stepType "ai.infer"), or a turn's inference attempt under INFERENCE=gateway
   * ("invoke": the model-inference run failed with the same error, which the server hands the
   * invoking step as that run reported it: the SDK's serialized StepError, docs/engine.md).
   */
  async function throughMiddleware(
    raw: ReturnType<typeof aiGatewayError>,
    stepType: "ai.infer" | "invoke" = "ai.infer",
  ) {
    const middleware = new ModelErrorMiddleware({ client: inngest });
    await middleware.transformFunctionInput({
      steps: { hashed: { type: "error", error: raw } },
    } as unknown as Middleware.TransformFunctionInputArgs);
    const stepError = new StepError("assistant", raw);
    // The SDK alone keeps the server's sentence, not the provider's.
    expect(stepError.message).toBe(raw.message);
    const wrapped = middleware.wrapStep!({
      next: () => Promise.reject(stepError),
      stepInfo: { hashedId: "hashed", stepType },
    } as unknown as Middleware.WrapStepArgs);
    const error = await wrapped.then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error).toBe(stepError);
    return describeFailure(error!);
  }

  for (const { provider, status, body, cause } of providers) {
    it(`records the ${provider} status and message: "${cause}"`, async () => {
      expect(await throughMiddleware(aiGatewayError(status, body))).toBe(cause);
    });
  }

  /** How the model-inference run reports the StepError its step.ai.infer threw: the SDK's own serialization. */
  const asInvokedRunError = (raw: ReturnType<typeof aiGatewayError>) =>
    serializeError(new StepError("inference", raw)) as unknown as ReturnType<typeof aiGatewayError>;

  for (const { provider, status, body, cause } of providers) {
    it(`records the ${provider} status and message from a failed inference attempt (an invoke under INFERENCE=gateway)`, async () => {
      const reported = asInvokedRunError(aiGatewayError(status, body));
      expect(reported).toMatchObject({ name: "AIGatewayError", stack: body });
      expect(await throughMiddleware(reported, "invoke")).toBe(cause);
    });
  }

  it("leaves an invoke whose run failed otherwise as it came", async () => {
    const other = serializeError(new Error("could not find function")) as unknown as ReturnType<typeof aiGatewayError>;
    expect(await throughMiddleware(other, "invoke")).toBe("could not find function");
  });

  it("says the provider answered with an empty body when the server substituted its own body but named a status", async () => {
    expect(await throughMiddleware(aiGatewayError(502, ""))).toBe(
      "The model provider answered HTTP 502 with an empty body.",
    );
  });

  it("says the provider gave no answer only when the server substituted its body and named no status", async () => {
    const noAnswer = aiGatewayError(undefined, "");
    expect(noAnswer.data).toBe('{"error":"Error making AI request"}');
    expect(await throughMiddleware(noAnswer)).toBe(
      "The model request got no answer from the provider (it timed out or could not connect).",
    );
  });

  it("end to end through the engine stand-in: the turn records the provider's status and message", async () => {
    const deps = { db: bed.db.pool, model: scriptedModel(bed.model) };
    const live = await startLiveEngine(bed.db.pool, [createChatTurn(deps), createModelInference(deps)]);
    try {
      const { status, body, cause } = providers[0]!;
      // Every attempt fails the same way: the turn's attempts, one model call each (docs/engine.md).
      const calls = TURN_RETRIES + 1;
      bed.model.script(...Array.from({ length: calls }, () => ({ status, body: JSON.parse(body) as unknown })));
      const event = chatEvent({ content: "Are you there?" });
      await live.engine.send(event);
      const run = await live.engine.runFor((r) => r.fnId === "threadline-chat-turn");
      await run.ended;
      const failure = await live.engine.runFor((r) => r.fnId === "threadline-chat-turn-failure");
      await failure.ended;
      expect(run.status).toBe("failed");
      expect(run.inferences.map((i) => i.status)).toEqual(Array(calls).fill(status));
      expect(await turnsOf(bed.db.pool, event.data.messageId)).toMatchObject([{ status: "failed", error: cause }]);
    } finally {
      await live.close();
    }
  });
});
