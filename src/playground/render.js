/**
 * Turning API answers into what the page shows. Text is always set as text (never as HTML), so
 * nothing a message holds can run in the page; search snippets keep only their <mark> tags.
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
export const messageText = (message) => ("text" in message.content ? message.content.text : answerText(message.content));

/**
 * A search snippet (HTML-escaped text with <mark> around matches) as nodes: its text, and only
 * <mark> elements, whatever else it might hold.
 */
export function snippetNodes(snippet) {
  const parsed = new DOMParser().parseFromString(`<body>${snippet}</body>`, "text/html");
  return [...parsed.body.childNodes].map((node) => (node.nodeName === "MARK" ? h("mark", {}, node.textContent) : node.textContent));
}

/** A timestamp in the reader's own locale. */
export const when = (iso) => new Date(iso).toLocaleString();
