import type { Inngest } from "inngest";
import { getSubscriptionToken, realtime } from "inngest/realtime";
import { z } from "zod";

/** The topic @inngest/use-agent subscribes to. */
const AGENT_STREAM_TOPIC = "agent_stream";

/** A user's channel, as @inngest/use-agent names it: every thread of the user streams there. */
export const userChannel = (userId: string) => `user:${userId}`;

/**
 * One message on the topic: AgentKit's streaming chunk (AgentMessageChunk), what use-agent reads.
 * `data.threadId` says which thread it belongs to; `sequenceNumber` orders a thread's chunks.
 */
const agentStreamChunk = z.object({
  event: z.string(),
  data: z.record(z.string(), z.unknown()),
  timestamp: z.number(),
  sequenceNumber: z.number(),
  id: z.string(),
});
export type AgentStreamChunk = z.infer<typeof agentStreamChunk>;

/** What a browser needs to subscribe: use-agent's token shape. */
export const subscriptionToken = z.object({
  key: z.string().meta({ description: "The subscription token (a short-lived JWT signed by Inngest)." }),
  channel: z.string().meta({ description: "The caller's channel: user:<user id>." }),
  topics: z.array(z.literal(AGENT_STREAM_TOPIC)),
  apiBaseUrl: z.string().optional().meta({ description: "Where to connect, when not Inngest Cloud (the dev server)." }),
});
type SubscriptionToken = z.infer<typeof subscriptionToken>;

/** Where the realtime relay publishes and where tokens come from: Inngest realtime, or a fake in tests. */
export type RealtimePublisher = {
  publish: (userId: string, chunk: AgentStreamChunk) => Promise<void>;
  /** A token that subscribes to this user's channel, topic agent_stream, and nothing else. */
  subscriptionToken: (userId: string) => Promise<SubscriptionToken>;
};

const agentChannel = realtime.channel({
  name: (userId: string) => userChannel(userId),
  topics: { [AGENT_STREAM_TOPIC]: { schema: agentStreamChunk } },
});

/**
 * Inngest realtime through the app's client: publishing from outside a function (no run id) and
 * tokens from Inngest's API. Both need the Inngest server (the dev server or Inngest Cloud).
 */
export function inngestRealtime(client: Inngest.Any): RealtimePublisher {
  return {
    publish: (userId, chunk) => client.realtime.publish(agentChannel(userId)[AGENT_STREAM_TOPIC], chunk),
    async subscriptionToken(userId) {
      const token = await getSubscriptionToken(client, { channel: userChannel(userId), topics: [AGENT_STREAM_TOPIC] });
      if (!token.key) throw new Error("Inngest answered without a realtime subscription token");
      return {
        key: token.key,
        channel: userChannel(userId),
        topics: [AGENT_STREAM_TOPIC],
        ...(token.apiBaseUrl ? { apiBaseUrl: token.apiBaseUrl } : {}),
      };
    },
  };
}
