/**
 * The conversation tree in the playground: editing a user message (a new branch: the thread's
 * path goes on from the edit, the old branch is kept) and ‹ n/m › between a message's versions,
 * which makes the chosen one the thread's current path (PUT …/messages/:id/current).
 */
import { h } from "./render.js";

/**
 * A user message's branch tools: Edit, and ‹ n/m › when the message has other versions (edits of
 * the same message). `button(label, onClick, attributes)` makes a button whose failures are shown.
 */
export function userBranchTools(message, { button, onEdit, onSwitch, disabled }) {
  const tools = h(
    "span",
    { class: "branch-tools" },
    button("Edit", () => onEdit(message.id), { disabled }),
  );
  const siblings = message.siblings;
  if (siblings && siblings.count > 1) tools.append(...switcher(siblings, "Message version", onSwitch, disabled));
  return tools;
}

/** ‹ n/m ›: the buttons name the version they switch to; the middle says which one is shown. */
function switcher({ count, position, ids }, noun, onSwitch, disabled) {
  const step = (label, symbol, delta) => {
    const target = ids[position - 1 + delta];
    const element = h(
      "button",
      { type: "button", "aria-label": `${label} ${noun.toLowerCase()}`, disabled: disabled || target === undefined },
      symbol,
    );
    element.addEventListener("click", () => onSwitch(target));
    return element;
  };
  return [
    step("Previous", "‹", -1),
    h("span", { "aria-label": `${noun} ${position} of ${count}` }, `${position}/${count}`),
    step("Next", "›", 1),
  ];
}

/** The form that replaces a user message's words while it is edited: the new words are sent as its edit. */
export function editForm(text, { onSave, onCancel, onInput }) {
  const area = h("textarea", { name: "content", rows: 3, "aria-label": "Edited message" }, text);
  const form = h(
    "form",
    { class: "edit-form" },
    area,
    h(
      "p",
      { class: "tools" },
      h("button", { type: "submit" }, "Save and send"),
      h("button", { type: "button", class: "cancel" }, "Cancel"),
    ),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (area.value.trim() !== "") onSave(area.value);
  });
  form.querySelector("button.cancel").addEventListener("click", onCancel);
  // The draft outlives a re-render of the thread (an event arriving while the user types).
  area.addEventListener("input", () => onInput(area.value));
  area.addEventListener("keydown", (event) => {
    if (event.key === "Escape") onCancel();
  });
  return form;
}

/**
 * Where an edit leaves the shown thread until the server's messages are read again: the messages
 * before the edited one (the edit follows them; the old branch is off the path).
 */
export const messagesBeforeEdit = (messages, editedId) => {
  const at = messages.findIndex((message) => message.id === editedId);
  return at === -1 ? messages : messages.slice(0, at);
};
