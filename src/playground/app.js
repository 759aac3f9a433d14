import { apiFor, authHeaders } from "./api.js";
import { isInferenceDelta, streamedTexts } from "./deltas.js";
import { followEvents } from "./event-stream.js";
import { answerText, h, messageText, snippetNodes, when } from "./render.js";
import * as session from "./session.js";

const $ = (id) => document.getElementById(id);

/** Everything the page shows comes from here; each change is followed by the matching render. */
const state = {
  api: null,
  credentials: null,
  threads: [],
  threadId: null,
  following: null,
  /** The last event id seen on the open thread, and its rows of inference deltas of turns not ended. */
  lastId: 0,
  pending: [],
  /** Runs of the open thread whose ending the page saw or made (a stop): a late delta of theirs is not shown. */
  endedRuns: new Set(),
  messages: [],
  /** Older messages exist than the page read (the playground shows the newest 200). */
  olderHidden: false,
  /** Messages sent from this page that the thread does not show yet: id → text. */
  outbox: new Map(),
  /** User messages whose turn (a send or a regenerate) was accepted and has not ended. */
  awaiting: new Set(),
  /** The answer variants of user messages that have several: id → {list, index of the one shown}. */
  variants: new Map(),
};

const threadHash = (threadId) => `#/threads/${threadId}`;
const say = (text) => {
  $("status").textContent = text;
};
const generating = "Generating a new answer…";

/** An event handler that shows what went wrong instead of dropping it. */
const guarded =
  (handler) =>
  async (...args) => {
    try {
      await handler(...args);
    } catch (error) {
      say(error.status === 401 ? `Sign in again: ${error.message}` : error.message);
    }
  };

// Signing in and out

async function signIn(credentials) {
  const api = apiFor(credentials);
  // Checks the credentials before keeping them: a refusal leaves the page signed out.
  const { threads } = await api.listThreads();
  Object.assign(state, { api, credentials, threads });
  session.saveCredentials(credentials);
  $("who").textContent = credentials.kind === "user" ? credentials.value : "token holder";
  $("sign-in").hidden = true;
  $("signed-in").hidden = false;
  $("workspace").hidden = false;
  say("");
  renderThreads();
  await showRoute();
}

function signOut() {
  stopFollowing();
  session.forgetAll();
  Object.assign(state, { api: null, credentials: null, threads: [], threadId: null, messages: [], pending: [] });
  $("search-results").replaceChildren();
  $("sign-in").hidden = false;
  $("signed-in").hidden = true;
  $("workspace").hidden = true;
  history.replaceState(null, "", location.pathname);
}

// Threads

async function refreshThreads() {
  state.threads = (await state.api.listThreads()).threads;
  renderThreads();
}

function renderThreads() {
  $("threads").replaceChildren(
    ...state.threads.map((thread) =>
      h(
        "li",
        {},
        h(
          "a",
          { href: threadHash(thread.id), "aria-current": thread.id === state.threadId ? "page" : false },
          thread.title ?? "Untitled thread",
          h("small", {}, `${thread.messageCount} messages · ${thread.latestTurnStatus ?? "no turns yet"} · ${when(thread.lastActivityAt)}`),
        ),
      ),
    ),
  );
  const open = state.threads.find((thread) => thread.id === state.threadId);
  $("thread-title").textContent = state.threadId === null ? "New conversation" : (open?.title ?? "Untitled thread");
}

/** The thread named in the address (#/threads/<id>), or a new conversation. */
async function showRoute() {
  const threadId = /^#\/threads\/([0-9a-f-]{36})$/i.exec(location.hash)?.[1] ?? null;
  if (threadId === state.threadId && state.following !== null) return;
  if (threadId === null) return closeThread();
  await openThread(threadId);
}

function closeThread() {
  stopFollowing();
  Object.assign(state, { threadId: null, messages: [], olderHidden: false, pending: [], endedRuns: new Set(), outbox: new Map(), awaiting: new Set(), variants: new Map() });
  renderThreads();
  renderMessages();
}

async function openThread(threadId) {
  stopFollowing();
  // A reload resumes where this tab was: after the last event seen, with the text streamed so far.
  const { lastId, pending } = session.loadStreamPosition(threadId);
  Object.assign(state, { threadId, lastId, pending, endedRuns: new Set(), messages: [], olderHidden: false, outbox: new Map(), awaiting: new Set(), variants: new Map() });
  renderThreads();
  renderMessages();
  const interrupted = "The event stream was interrupted; resuming where it stopped…";
  state.following = followEvents({
    threadId,
    headers: authHeaders(state.credentials),
    after: lastId,
    onConnected: () => {
      if ($("status").textContent === interrupted) say("");
    },
    onEvents: (batch) => receive(threadId, batch),
    onInterrupted: () => say(interrupted),
    onRefused: (error) => say(error.message),
  });
  await loadMessages(threadId);
}

function stopFollowing() {
  state.following?.stop();
  state.following = null;
}

async function loadMessages(threadId) {
  const page = await state.api.readMessages(threadId);
  if (threadId !== state.threadId) return;
  state.messages = page.messages;
  state.olderHidden = page.hasMore;
  // Deltas of a turn the thread shows as ended are left over (its ending came before lastId).
  const ended = new Set(page.messages.filter((m) => m.turn && m.turn.status !== "running").map((m) => m.turn.runId));
  state.pending = state.pending.filter((row) => !ended.has(row.data.runId));
  for (const message of page.messages) state.outbox.delete(message.id);
  renderMessages();
  await loadVariants(threadId);
}

/** The variants of each answer that has several (read again when their number changed), for ‹ n/m ›. */
async function loadVariants(threadId) {
  const stale = state.messages.filter((m) => m.role === "user" && (m.variantCount ?? 0) > 1 && state.variants.get(m.id)?.list.length !== m.variantCount);
  if (stale.length === 0) return;
  const read = await Promise.all(stale.map((m) => state.api.variants(threadId, m.id)));
  if (threadId !== state.threadId) return;
  for (const { messageId, variants } of read) state.variants.set(messageId, { list: variants, index: Math.max(0, variants.findIndex((v) => v.current)) });
  renderMessages();
}

// The event stream

/** A batch of the open thread's events: deltas grow the live answer; an ending re-reads the thread. */
function receive(threadId, batch) {
  if (threadId !== state.threadId) return;
  let ended = false;
  let renamed = false;
  for (const row of batch) {
    if (row.event === "text.delta" && isInferenceDelta(row.data) && !state.endedRuns.has(row.data.runId)) state.pending.push(row);
    if (row.event === "stream.ended") {
      ended = true;
      forgetTurn(row.data);
    }
    if (row.event === "title.changed") renamed = true;
    state.lastId = row.id;
  }
  session.saveStreamPosition(threadId, { lastId: state.lastId, pending: state.pending });
  renderLive();
  if (ended) {
    // Other news (a stop that found nothing to stop, a failed request) stays until the next action.
    if ($("status").textContent === generating) say("");
    guarded(() => Promise.all([loadMessages(threadId), refreshThreads()]))();
  } else if (renamed) {
    guarded(refreshThreads)();
  }
}

/** A turn that ended (`{runId, messageId}`): its arriving text goes; the thread's messages show its outcome. */
function forgetTurn({ runId, messageId }) {
  state.endedRuns.add(runId);
  state.pending = state.pending.filter((pending) => pending.data.runId !== runId);
  state.awaiting.delete(messageId);
}

/** User messages the thread showed as being answered, less those whose turn has ended since. */
const answering = () => state.messages.filter((m) => m.turn?.status === "running" && !state.endedRuns.has(m.turn.runId));

const running = () => state.awaiting.size > 0 || state.pending.length > 0 || answering().length > 0;

function renderLive() {
  const texts = streamedTexts(state.pending);
  $("live-answer").hidden = texts.length === 0;
  $("live-answer").textContent = texts.map((streamed) => streamed.text).join("\n\n");
  $("stop").disabled = state.threadId === null || !running();
}

// Messages, answers and their variants

/** The thread's messages grouped by turn: a user message and the answers that follow it. */
function turnsOf(messages) {
  const turns = [];
  for (const message of messages) {
    const turn = turns[turns.length - 1];
    if (message.role === "assistant" && turn?.user && message.answers === turn.user.id) turn.answers.push(message);
    else turns.push(message.role === "user" ? { user: message, answers: [] } : { other: message });
  }
  return turns;
}

function renderMessages() {
  const items = turnsOf(state.messages).flatMap((turn) => (turn.other ? [otherItem(turn.other)] : turnItems(turn)));
  if (state.olderHidden) items.unshift(h("li", { class: "meta" }, "Older messages are not shown here."));
  for (const text of state.outbox.values()) items.push(h("li", { class: "message user" }, h("div", { class: "meta" }, "You · sending"), text));
  $("messages").replaceChildren(...items);
  renderLive();
}

const otherItem = (message) => h("li", { class: `message ${message.role}` }, h("div", { class: "meta" }, message.role), messageText(message));

function turnItems({ user, answers }) {
  const status = user.turn?.status;
  const userItem = h(
    "li",
    { class: "message user" },
    h("div", { class: "meta" }, `You · ${when(user.createdAt)}`, status && status !== "completed" ? ` · ${status}` : ""),
    user.content.text,
    status === "failed"
      ? h("p", { class: "failure tools" }, `The answer failed: ${user.turn.error ?? "no cause recorded"}`, button("Retry", () => regenerate(user.id)))
      : null,
    // Stopped before any text arrived: no answer carries a Regenerate button, so the message would be stranded.
    status === "stopped" && answers.length === 0
      ? h("p", { class: "failure tools" }, "You stopped this answer before any text arrived.", button("Retry", () => regenerate(user.id)))
      : null,
  );
  if (answers.length === 0) return [userItem];
  // The thread shows its current answer; a variant the reader flipped to is shown in its place.
  const choice = state.variants.get(user.id);
  const flipped = choice && !choice.list[choice.index].current ? choice.list[choice.index] : null;
  const shown = flipped
    ? [{ agentName: flipped.results[0]?.agentName ?? "assistant", text: flipped.results.map((r) => answerText(r.content)).join("\n\n"), stopped: flipped.stopped === true }]
    : answers.map((answer) => ({ agentName: answer.agentName, text: messageText(answer), stopped: answer.stopped === true }));
  const answerItems = shown.map(({ agentName, text, stopped }) =>
    h("li", { class: "message assistant" }, h("div", { class: "meta" }, agentName, stopped ? [" · ", stoppedLabel()] : null), text),
  );
  answerItems[answerItems.length - 1].append(answerTools(user.id, choice));
  return [userItem, ...answerItems];
}

const stoppedLabel = () => h("strong", { class: "stopped", title: "You stopped this answer: it is what the model had written by then." }, "Stopped");

/** Regenerate, and ‹ n/m › through the variants when there are several. */
function answerTools(messageId, choice) {
  const tools = h("div", { class: "tools" }, button("Regenerate", () => regenerate(messageId), { disabled: state.awaiting.has(messageId) }));
  if (choice && choice.list.length > 1) {
    const count = choice.list.length;
    const position = choice.index;
    tools.append(
      button("‹", () => flip(messageId, -1), { "aria-label": "Previous answer variant", disabled: position === 0 }),
      h("span", { "aria-label": `Answer variant ${position + 1} of ${count}` }, `${position + 1}/${count}`),
      button("›", () => flip(messageId, 1), { "aria-label": "Next answer variant", disabled: position === count - 1 }),
    );
  }
  return tools;
}

function button(label, onClick, attributes = {}) {
  const element = h("button", { type: "button", ...attributes }, label);
  element.addEventListener("click", guarded(onClick));
  return element;
}

function flip(messageId, step) {
  const choice = state.variants.get(messageId);
  choice.index = Math.min(Math.max(choice.index + step, 0), choice.list.length - 1);
  renderMessages();
}

async function regenerate(messageId) {
  await state.api.regenerate(state.threadId, messageId);
  state.awaiting.add(messageId);
  state.variants.delete(messageId);
  say(generating);
  renderMessages();
}

// Sending, stopping, searching

async function send(event) {
  event.preventDefault();
  const form = event.currentTarget;
  const content = form.elements.content.value;
  if (content.trim() === "") return;
  form.querySelector("button[type=submit]").disabled = true;
  try {
    if (state.threadId === null) {
      // A thread made first, so its event stream can be followed before the turn starts.
      const thread = await state.api.createThread();
      history.pushState(null, "", threadHash(thread.id));
      await openThread(thread.id);
    }
    const accepted = await state.api.send(state.threadId, content);
    form.elements.content.value = "";
    say("");
    state.outbox.set(accepted.messageId, content);
    state.awaiting.add(accepted.messageId);
    renderMessages();
    await refreshThreads();
  } finally {
    form.querySelector("button[type=submit]").disabled = false;
  }
}

/** The user message whose answer is being written: the thread's earliest turn not ended (it answers one at a time, in order). */
const runningMessageId = () => answering()[0]?.id ?? state.awaiting.values().next().value;

/**
 * Stops the turn whose answer is arriving, named by its user message, so a click that comes as
 * that turn ends cannot stop the next one. The page is ready for the next message at once; the
 * thread's messages then show the partial answer, marked Stopped.
 */
async function stop() {
  const threadId = state.threadId;
  $("stop").disabled = true;
  try {
    const stopped = await state.api.stop(threadId, runningMessageId());
    if (threadId !== state.threadId) return;
    say("");
    forgetTurn(stopped);
    session.saveStreamPosition(threadId, { lastId: state.lastId, pending: state.pending });
  } catch (error) {
    // The answer ended (or has not started) as the user clicked: nothing went wrong.
    if (error.code !== "no_running_turn") throw error;
    say("Nothing to stop: no answer is being written right now.");
  } finally {
    renderLive();
  }
  await Promise.all([loadMessages(threadId), refreshThreads()]);
}

async function search(event) {
  event.preventDefault();
  const { query, results } = await state.api.search(event.currentTarget.elements.q.value);
  $("search-results").replaceChildren(
    ...(results.length === 0
      ? [h("li", {}, `Nothing found for “${query}”.`)]
      : results.map((hit) =>
          h(
            "li",
            {},
            h("a", { href: threadHash(hit.threadId) }, snippetNodes(hit.snippet), h("small", {}, `${hit.role} · ${when(hit.createdAt)}${hit.onPath ? "" : " · replaced"}`)),
          ),
        )),
  );
}

// Wiring

$("sign-in").addEventListener(
  "submit",
  guarded(async (event) => {
    event.preventDefault();
    const { user, token } = event.currentTarget.elements;
    if (token.value.trim() !== "") await signIn({ kind: "token", value: token.value.trim() });
    else if (user.value.trim() !== "") await signIn({ kind: "user", value: user.value.trim() });
    else say("Enter a user name (servers running with AUTH=dev) or paste a token.");
  }),
);
$("sign-out").addEventListener("click", signOut);
$("new-thread").addEventListener(
  "click",
  guarded(async () => {
    const thread = await state.api.createThread();
    location.hash = threadHash(thread.id);
    await refreshThreads();
  }),
);
$("composer").addEventListener("submit", guarded(send));
$("stop").addEventListener("click", guarded(stop));
$("search").addEventListener("submit", guarded(search));
window.addEventListener("hashchange", guarded(showRoute));

const saved = session.loadCredentials();
if (saved !== null) guarded(signIn)(saved);
