// The types of deltas.js (the browser loads it as it is) for the server's TypeScript.
import type { ThreadEvent } from "../history/events.js";

/** The text streamed so far by one inference step's latest attempt. */
export type StreamedText = { runId: string; stepId: string; attempt: number; text: string };

export function isInferenceDelta(data: unknown): boolean;

export function streamedTexts(events: readonly ThreadEvent[], runId?: string): StreamedText[];
