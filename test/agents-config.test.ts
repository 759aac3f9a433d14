import { describe, expect, it } from "vitest";
import { agentsConfig, readEnvironment } from "../src/config.js";

describe("agents configuration from the environment", () => {
  it("defaults to the assistant alone, with no memory and no extraction", () => {
    expect(agentsConfig(readEnvironment({}))).toEqual({
      network: "assistant",
      memory: { agents: {}, contextTokens: 500, extract: false },
    });
  });

  it("gives the named agents user memory, with the operator's budget and extraction", () => {
    const env = readEnvironment({
      NETWORK: "pair",
      MEMORY_AGENTS: " assistant, reviewer ,assistant",
      MEMORY_CONTEXT_TOKENS: "800",
      MEMORY_EXTRACTION: "1",
    });
    expect(agentsConfig(env)).toEqual({
      network: "pair",
      memory: { agents: { assistant: ["user-memory"], reviewer: ["user-memory"] }, contextTokens: 800, extract: true },
    });
  });

  it("refuses an unknown network, an agent the network does not have, and a budget out of range, saying what to fix", () => {
    expect(() => readEnvironment({ NETWORK: "trio" })).toThrow('NETWORK must be "assistant" or "pair"');
    expect(() => readEnvironment({ MEMORY_AGENTS: "reviewer" })).toThrow(
      "reviewer is not an agent of the assistant network (its agents: assistant)",
    );
    expect(() => readEnvironment({ MEMORY_CONTEXT_TOKENS: "10" })).toThrow("MEMORY_CONTEXT_TOKENS must be at least 50");
  });
});
