/**
 * Turning API answers into what the page shows. Text is set as text (never as HTML), so nothing a
 * message holds can run in the page; answers go through markdown.js (rendered, then sanitized);
 * search snippets keep only their <mark> tags.
 */

/** An element with attributes and children (strings become text). */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === false || value === undefined || value === null) continue;
    element.setAttribute(name, value === true ? "" : String(value));
  }
  element.append(...children.flat().filter((child) => child !== null && child !== undefined && child !== false));
  return element;
}

const textOf = (content) => (typeof content === "string" ? content : content.map((part) => part.text).join(""));

/** What an answer's AgentKit output says: its text messages, and a line for each tool it called. */
export function answerText(content) {
  return content.output
    .map((message) => {
      if (message.type === "text") return textOf(message.content);
      if (message.type === "tool_call") return message.tools.map((tool) => `[used the tool ${tool.name}]`).join("\n");
      return "";
    })
    .filter((text) => text !== "")
    .join("\n\n");
}

/** A message's text as the messages API returns it: `{text}` for user messages, AgentKit output for answers. */
export const messageText = (message) =>
  "text" in message.content ? message.content.text : answerText(message.content);

/**
 * A search snippet (HTML-escaped text with <mark> around matches) as nodes: its text, and only
 * <mark> elements, whatever else it might hold.
 */
export function snippetNodes(snippet) {
  const parsed = new DOMParser().parseFromString(`<body>${snippet}</body>`, "text/html");
  return [...parsed.body.childNodes].map((node) =>
    node.nodeName === "MARK" ? h("mark", {}, node.textContent) : node.textContent,
  );
}

/** A timestamp in the reader's own locale. */
export const when = (iso) => new Date(iso).toLocaleString();

/** "1 message", "2 messages", "no messages". */
export const plural = (count, one, many) => (count === 0 ? `no ${many}` : `${count} ${count === 1 ? one : many}`);

/**
 * What a turn's state reads as, from the messages API's `turn` (`{status, error}`), what the page
 * knows besides (`sending`: its request is not accepted yet; `retrying`: the latest turn.retrying
 * of a turn still running). Empty for a completed turn.
 */
export function turnLabel({ status, error, sending = false, retrying = null }) {
  if (sending) return { text: "sending…", kind: "running" };
  if (retrying)
    return { text: `retrying ${retrying.attempt}/${retrying.maxAttempts}: ${retrying.cause}`, kind: "retrying" };
  switch (status) {
    case "running":
      return { text: "answering…", kind: "running" };
    case "retrying":
      return { text: `retrying: ${error ?? "the model failed"}`, kind: "retrying" };
    case "awaiting_approval":
      return { text: "waiting for your approval", kind: "running" };
    case "failed":
      return { text: `failed: ${error ?? "no cause recorded"}`, kind: "failed" };
    case "stopped":
      return { text: "stopped", kind: "stopped" };
    case "completed":
    case undefined:
    case null:
      return { text: "", kind: "" };
    default:
      return { text: status, kind: status };
  }
}
