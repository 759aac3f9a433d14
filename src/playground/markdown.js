/**
 * Answers as Markdown: marked turns the text into HTML, DOMPurify keeps only the elements and
 * attributes below, and the page inserts the result as nodes. HTML written in an answer shows as
 * text (the model's words are not markup), images show as links (the CSP loads none from elsewhere),
 * and links open in a new tab without access to this page.
 */
import { Marked } from "./vendor/marked.js";
import DOMPurify from "./vendor/purify.js";

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escapeHtml = (text) => text.replace(/[&<>"']/g, (character) => ESCAPES[character]);

const marked = new Marked({
  gfm: true,
  breaks: true,
  async: false,
  renderer: {
    html: ({ text }) => escapeHtml(text),
    image: ({ href, text }) => `<a href="${escapeHtml(href)}">${escapeHtml(text || href)}</a>`,
  },
});

const ALLOWED_TAGS = [
  "a",
  "blockquote",
  "br",
  "code",
  "del",
  "em",
  "h1",
  "h2",
  "h3",
  "h4",
  "h5",
  "h6",
  "hr",
  "li",
  "ol",
  "p",
  "pre",
  "strong",
  "table",
  "tbody",
  "td",
  "th",
  "thead",
  "tr",
  "ul",
];
const ALLOWED_ATTR = ["href", "title", "class", "start"];

const purifier = DOMPurify(window);
purifier.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

/** The nodes of `text` rendered as Markdown, sanitized. */
export function markdownNodes(text) {
  const html = marked.parse(text);
  return purifier.sanitize(html, { ALLOWED_TAGS, ALLOWED_ATTR, RETURN_DOM_FRAGMENT: true });
}
