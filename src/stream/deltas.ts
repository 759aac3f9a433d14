/**
 * The text each inference step streamed, folded from a thread's events by the readers' rule for
 * retries (a later attempt supersedes an earlier one's text). The rule is one plain JavaScript
 * module, src/playground/deltas.js, because the playground page loads it too and runs no build
 * step; the server reads it through here.
 */
export { streamedTexts } from "../playground/deltas.js";
