import { describe, expect, it } from "vitest";
import { agentsConfig, readEnvironment } from "../src/config.js";

describe("agents configuration from the environment", () => {
  it("defaults to the assistant alone, with no memory and no extraction", () => {
    expect(agentsConfig(readEnvironment({}))).toEqual({
      network: "assistant",
      memory: { agents: {}, contextTokens: 500, extract: false },
      approvals: { tools: [], expiryMinutes: 1440, demoTool: true },
    });
  });

  it("names the tools that need approval, their expiry, and turns the demo tool off", () => {
    const env = readEnvironment({
      APPROVAL_TOOLS: "current_time, remember",
      APPROVAL_EXPIRY_MINUTES: "30",
      DEMO_TOOL: "0",
    });
    expect(agentsConfig(env).approvals).toEqual({
      tools: ["current_time", "remember"],
      expiryMinutes: 30,
      demoTool: false,
    });
    expect(() => readEnvironment({ APPROVAL_EXPIRY_MINUTES: "0" })).toThrow(
      /APPROVAL_EXPIRY_MINUTES must be at least 1/,
    );
  });

  it("gives the named agents user memory, with the operator's budget and extraction", () => {
    const env = readEnvironment({
      NETWORK: "pair",
      MEMORY_AGENTS: " assistant, reviewer ,assistant",
      MEMORY_CONTEXT_TOKENS: "800",
      MEMORY_EXTRACTION: "1",
    });
    expect(agentsConfig(env)).toMatchObject({
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
