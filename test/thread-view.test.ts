import { AgentResult, type NetworkRun, type StateData } from "@inngest/agent-kit";
import { describe, expect, it } from "vitest";
import { setPriorResultCount, setUserMessageText } from "../src/agents/run-state.js";
import { threadView, TurnState } from "../src/agents/thread-view.js";

/*
 * threadView keeps each agent's view of a run's stored results (frozen, shared by its replays),
 * found by the last of them: a list that ends in the same result but holds others is seen anew,
 * as is a list of results that are not frozen.
 */

const result = (agentName: string, text: string, frozen = true) => {
  const r = new AgentResult(agentName, [{ type: "text", role: "assistant", content: text }], [], new Date(0));
  if (frozen) for (const value of [r.output[0], r.output, r]) Object.freeze(value);
  return r;
};

async function historySeenBy(agentName: string, prior: AgentResult[], thisTurn: AgentResult[] = []) {
  const state = new TurnState({ data: {} });
  state.setResults([...prior, ...thisTurn]);
  setPriorResultCount(state, prior.length);
  setUserMessageText(state, "And now?");
  const { history } = await threadView(
    agentName,
    undefined,
  )({
    prompt: [{ type: "text", role: "system", content: "Be brief." }],
    network: { state } as unknown as NetworkRun<StateData>,
  });
  return history!.map((m) => (m.type === "text" ? m.content : m.type));
}

describe("an agent's view of stored results", () => {
  it("is the same on every call, and a list ending in the same result is seen as it is", async () => {
    const [a, b, c] = [result("assistant", "one"), result("reviewer", "two"), result("assistant", "three")];
    const expected = ["one", "two", "three", "And now?"];
    expect(await historySeenBy("assistant", [a!, b!, c!])).toEqual(expected);
    expect(await historySeenBy("assistant", [a!, b!, c!])).toEqual(expected);
    expect(await historySeenBy("assistant", [b!, c!])).toEqual(["two", "three", "And now?"]);
    // Another agent's view of the same results is its own.
    expect(await historySeenBy("reviewer", [a!, b!, c!])).toEqual(expected);
    // This turn's results follow the current message.
    const d = result("assistant", "four", false);
    expect(await historySeenBy("assistant", [a!, b!, c!], [d])).toEqual([...expected, "four"]);
  });

  it("of results that may change is built on each call", async () => {
    const [a, b] = [result("assistant", "one", false), result("assistant", "two")];
    expect(await historySeenBy("assistant", [a, b])).toEqual(["one", "two", "And now?"]);
    a.output[0] = { type: "text", role: "assistant", content: "one, changed" };
    expect(await historySeenBy("assistant", [a, b])).toEqual(["one, changed", "two", "And now?"]);
  });
});
