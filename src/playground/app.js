import { apiFor, authHeaders } from "./api.js";
import { approvalCards, isApprovalEvent, isAwaitingApproval } from "./approvals.js";
import { isInferenceDelta, streamedTexts } from "./deltas.js";
import { followEvents } from "./event-stream.js";
import { feedbackControls, rateAnswer } from "./feedback.js";
import { markdownNodes } from "./markdown.js";
import { editForm, messagesBeforeEdit, userBranchTools } from "./branches.js";
import { answerText, h, messageText, plural, snippetNodes, turnLabel, when } from "./render.js";
import * as session from "./session.js";
import { turnUsageLine } from "./usage.js";

const $ = (id) => document.getElementById(id);

/** What the page holds of the open thread, as it is before anything of the thread was read. */
const unreadThread = () => ({
  /** The open thread's creation time: its event log's identity (see session.loadStreamPosition). */
  epoch: null,
  /** The last event id seen on the open thread, and its rows of inference deltas of turns not ended. */
  lastId: 0,
  pending: [],
  /** The latest turn.retrying of each run not ended (run id → its data and the attempt streamed before it). */
  retrying: new Map(),
  /** Runs of the open thread whose ending the page saw or made (a stop): a late delta of theirs is not shown. */
  endedRuns: new Set(),
  messages: [],
  /** Older messages exist than the page read (the playground shows the newest 200). */
  olderHidden: false,
  /** Messages sent from this page that the thread does not show yet: id → {text, sending (not accepted yet)}. */
  outbox: new Map(),
  /** User messages whose turn (a send or a regenerate) was accepted and has not ended. */
  awaiting: new Set(),
  /** The answer variants of user messages that have several: id → {list, index of the one shown}. */
  variants: new Map(),
  /** The user message being edited (branches.js) and the words typed so far, or null. */
  editing: null,
});

/** Everything the page shows comes from here; each change is followed by the matching render. */
const state = {
  api: null,
  credentials: null,
  /** GET /api/info: the model and inference mode (null from a server without it). */
  info: null,
  threads: [],
  threadId: null,
  following: null,
  ...unreadThread(),
};

const threadHash = (threadId) => `#/threads/${threadId}`;
const say = (text) => {
  $("status").textContent = text;
};
const GONE =
  "This thread no longer exists: it was deleted (in another tab?). Send a message to start a new conversation.";

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
  // A server from before GET /api/info: the page simply shows no model line.
  const info = await api.info().catch((error) => (error.status === 404 ? null : Promise.reject(error)));
  Object.assign(state, { api, credentials, threads, info });
  session.saveCredentials(credentials);
  $("who").textContent = credentials.kind === "user" ? credentials.value : "token holder";
  $("sign-in").hidden = true;
  $("signed-in").hidden = false;
  $("workspace").hidden = false;
  say("");
  renderInfo();
  renderThreads();
  await showRoute();
}

function signOut() {
  stopFollowing();
  session.forgetAll();
  Object.assign(state, {
    api: null,
    credentials: null,
    info: null,
    threads: [],
    threadId: null,
    epoch: null,
    messages: [],
    pending: [],
    retrying: new Map(),
  });
  renderInfo();
  $("search-results").replaceChildren();
  $("sign-in").hidden = false;
  $("signed-in").hidden = true;
  $("workspace").hidden = true;
  history.replaceState(null, "", location.pathname);
}

/** The model line, and before anything is sent to a server without a model, how to configure one. */
function renderInfo() {
  const model = state.info?.model;
  const inference = state.info ? ` · inference: ${state.info.inference}` : "";
  $("model-info").textContent = !model
    ? ""
    : model.configured
      ? `Model: ${model.name} (${model.source === "ollama" ? "local Ollama" : model.provider})${inference}`
      : `No model configured${inference}`;
  $("setup").hidden = !model || model.configured;
  if (model && !model.configured) {
    $("setup-problem").textContent = model.problem;
    $("setup-steps").replaceChildren(...model.setup.map((step) => h("li", {}, step)));
  }
}

// Threads

async function refreshThreads() {
  state.threads = (await state.api.listThreads()).threads;
  renderThreads();
  // The open thread was deleted and written again under its id (elsewhere): its log starts again.
  const open = state.threads.find((thread) => thread.id === state.threadId);
  if (open && state.epoch !== null && open.createdAt !== state.epoch) await openThread(open.id, { keepSent: true });
}

const statusLabel = (status) =>
  status === null
    ? "no turns yet"
    : status === "running"
      ? "answering…"
      : isAwaitingApproval(status)
        ? "waiting for approval"
        : status;

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
          h(
            "small",
            {},
            `${plural(thread.messageCount, "message", "messages")} · ${statusLabel(thread.latestTurnStatus)} · ${when(thread.lastActivityAt)}`,
          ),
        ),
      ),
    ),
  );
  const open = state.threads.find((thread) => thread.id === state.threadId);
  $("thread-title").textContent = state.threadId === null ? "New conversation" : (open?.title ?? "Untitled thread");
  $("thread-actions").hidden =
    state.threadId === null || state.epoch === null || !$("rename-form").hidden || !$("delete-confirm").hidden;
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
  Object.assign(state, { threadId: null, ...unreadThread() });
  closeThreadForms();
  renderThreads();
  renderMessages();
}

/** The thread, or null when it does not exist (deleted, or not yet written). */
const readThreadOrNull = (threadId) =>
  state.api.readThread(threadId).catch((error) => (error.status === 404 ? null : Promise.reject(error)));

/**
 * Opens a thread: its messages, and its event log followed from where this tab had read it (after a
 * reload: the text streamed so far shows at once) — or from its start when the thread is not the
 * one that was read (deleted and written again under its id: a new creation time, a log that
 * starts again at 1). `keepSent`: the same thread opened again, keeping what this page sent to it.
 */
async function openThread(threadId, { keepSent = false } = {}) {
  stopFollowing();
  const sent = keepSent && threadId === state.threadId ? { outbox: state.outbox, awaiting: state.awaiting } : {};
  if (threadId !== state.threadId) closeThreadForms();
  Object.assign(state, { ...unreadThread(), threadId, ...sent });
  renderThreads();
  renderMessages();
  const thread = await readThreadOrNull(threadId);
  if (threadId !== state.threadId) return;
  if (thread === null) return threadGone(threadId);
  const saved = session.loadStreamPosition(threadId);
  const position = saved.epoch === thread.createdAt ? saved : { lastId: 0, pending: [], retrying: [] };
  Object.assign(state, {
    epoch: thread.createdAt,
    lastId: position.lastId,
    pending: position.pending,
    retrying: new Map(position.retrying.map((entry) => [entry.key, entry])),
  });
  savePosition();
  renderThreads();
  renderLive();
  const interrupted = "The event stream was interrupted; resuming where it stopped…";
  let connections = 0;
  state.following = followEvents({
    threadId,
    headers: authHeaders(state.credentials),
    after: state.lastId,
    onConnected: () => {
      if ($("status").textContent === interrupted) say("");
      // Back after a drop: the thread may have been deleted and written again meanwhile.
      if (++connections > 1) guarded(() => checkLog(threadId))();
    },
    onEvents: (batch) => receive(threadId, batch),
    onInterrupted: () => say(interrupted),
    onRefused: (error) =>
      error.status === 404 && threadId === state.threadId ? threadGone(threadId) : say(error.message),
  });
  await loadMessages(threadId);
  scrollToEnd();
}

/** The open thread was deleted: nothing of its log is worth resuming from. */
function threadGone(threadId) {
  stopFollowing();
  session.forgetStreamPosition(threadId);
  Object.assign(state, { epoch: null, lastId: 0, pending: [], retrying: new Map(), messages: [] });
  renderThreads();
  renderMessages();
  say(GONE);
}

/**
 * Makes sure the open thread's log is the one followed: one written again elsewhere (its id reused
 * once its tombstone expired) is followed from its start. A thread deleted since is gone for good
 * (its id is refused for a while): `restart` (about to send) starts a new conversation instead.
 */
async function checkLog(threadId, { restart = false } = {}) {
  const thread = await readThreadOrNull(threadId);
  if (threadId !== state.threadId) return;
  if (thread === null) {
    if (!restart) return threadGone(threadId);
    const fresh = await state.api.createThread();
    history.pushState(null, "", threadHash(fresh.id));
    if ($("status").textContent === GONE) say("");
    await openThread(fresh.id);
  } else if (thread.createdAt !== state.epoch || state.following === null) {
    await openThread(threadId, { keepSent: true });
  }
}

function stopFollowing() {
  state.following?.stop();
  state.following = null;
}

function savePosition() {
  if (state.threadId === null || state.epoch === null) return;
  session.saveStreamPosition(state.threadId, {
    lastId: state.lastId,
    pending: state.pending,
    retrying: [...state.retrying.values()],
    epoch: state.epoch,
  });
}

async function loadMessages(threadId) {
  const page = await state.api.readMessages(threadId);
  if (threadId !== state.threadId) return;
  state.messages = page.messages;
  state.olderHidden = page.hasMore;
  // Deltas of a turn the thread shows as ended are left over (its ending came before lastId).
  const ended = new Set(
    page.messages
      .filter(
        (m) =>
          m.turn && m.turn.status !== "running" && m.turn.status !== "retrying" && !isAwaitingApproval(m.turn.status),
      )
      .map((m) => m.turn.runId),
  );
  state.pending = state.pending.filter((row) => !ended.has(row.data.runId));
  for (const key of [...state.retrying.keys()]) if (ended.has(key)) state.retrying.delete(key);
  for (const message of page.messages) state.outbox.delete(message.id);
  renderMessages();
  await loadVariants(threadId);
}

/** The variants of each answer that has several (read again when their number changed), for ‹ n/m ›. */
async function loadVariants(threadId) {
  const stale = state.messages.filter(
    (m) => m.role === "user" && (m.variantCount ?? 0) > 1 && state.variants.get(m.id)?.list.length !== m.variantCount,
  );
  if (stale.length === 0) return;
  const read = await Promise.all(stale.map((m) => state.api.variants(threadId, m.id)));
  if (threadId !== state.threadId) return;
  for (const { messageId, variants } of read)
    state.variants.set(messageId, {
      list: variants,
      index: Math.max(
        0,
        variants.findIndex((v) => v.current),
      ),
    });
  renderMessages();
}

// The event stream

/** A batch of the open thread's events: deltas grow the live answer; an ending re-reads the thread. */
function receive(threadId, batch) {
  if (threadId !== state.threadId) return;
  let ended = false;
  let renamed = false;
  let approvals = false;
  const retries = state.retrying.size;
  for (const row of batch) {
    if (row.event === "text.delta" && isInferenceDelta(row.data) && !state.endedRuns.has(row.data.runId)) {
      state.pending.push(row);
      // Text of an attempt after the one that failed: the retry is answering.
      for (const [key, retry] of state.retrying)
        if ((retry.runId === null || retry.runId === row.data.runId) && row.data.attempt > retry.streamedAttempt)
          state.retrying.delete(key);
    }
    if (row.event === "message.refused" || row.event === "message.failed" || row.event === "message.cancelled")
      notAccepted(row.data);
    if (row.event === "turn.retrying") noteRetry(row.data);
    if (row.event === "stream.ended") {
      ended = true;
      forgetTurn(row.data);
    }
    if (row.event === "title.changed") renamed = true;
    if (isApprovalEvent(row)) approvals = true;
    // Another branch is the thread's path now (switched or edited, here or elsewhere).
    if (row.event === "thread.path.changed") ended = true;
    state.lastId = row.id;
  }
  savePosition();
  // A retry that began or ended changes its message's label; otherwise only the arriving answer changes.
  if (state.retrying.size !== retries || batch.some((row) => row.event === "turn.retrying")) renderMessages();
  else keepingScroll(renderLive);
  if (ended || approvals) {
    guarded(() => Promise.all([loadMessages(threadId), refreshThreads()]))();
  } else if (renamed) {
    guarded(refreshThreads)();
  }
}

/** turn.retrying `{attempt, maxAttempts, cause, nextAttemptAt?}` (with the run and message when the row names them). */
function noteRetry(data) {
  const runId = typeof data.runId === "string" ? data.runId : null;
  if (runId !== null && state.endedRuns.has(runId)) return;
  const streamed = state.pending
    .filter((row) => runId === null || row.data.runId === runId)
    .map((row) => row.data.attempt);
  state.retrying.set(runId ?? "", {
    key: runId ?? "",
    runId,
    messageId: typeof data.messageId === "string" ? data.messageId : null,
    attempt: data.attempt,
    maxAttempts: data.maxAttempts,
    cause: data.cause,
    streamedAttempt: Math.max(-1, ...streamed),
  });
}

/**
 * A message sent with busy reject that its thread refused after all (a turn began meanwhile), or
 * whose run failed before it stored anything: the words go back to the composer (when it is
 * empty) with the reason.
 */
function notAccepted({ messageId, error }) {
  const sent = state.outbox.get(messageId);
  if (!sent) return;
  state.outbox.delete(messageId);
  state.awaiting.delete(messageId);
  if ($("message").value === "") $("message").value = sent.text;
  say(error);
}

/** A turn that ended (`{runId, messageId}`): its arriving text goes; the thread's messages show its outcome. */
function forgetTurn({ runId, messageId }) {
  state.endedRuns.add(runId);
  state.pending = state.pending.filter((pending) => pending.data.runId !== runId);
  state.retrying.delete(runId);
  if (state.retrying.get("")?.messageId === messageId) state.retrying.delete("");
  state.awaiting.delete(messageId);
}

/** User messages the thread showed as being answered, less those whose turn has ended since. */
const answering = () =>
  state.messages.filter(
    (m) =>
      (m.turn?.status === "running" || m.turn?.status === "retrying" || isAwaitingApproval(m.turn?.status)) &&
      !state.endedRuns.has(m.turn.runId),
  );

const running = () => state.awaiting.size > 0 || state.pending.length > 0 || answering().length > 0;

/** The user message whose answer is being written: the thread's earliest turn not ended (it answers one at a time, in order). */
const runningMessageId = () => answering()[0]?.id ?? state.awaiting.values().next().value;

/** The retry under way for a user message's turn, if any. */
function retryOf(messageId, runId) {
  for (const retry of state.retrying.values()) {
    if (retry.messageId === messageId || (runId !== undefined && retry.runId === runId)) return retry;
    if (retry.messageId === null && retry.runId === null && runningMessageId() === messageId) return retry;
  }
  return null;
}

/** What a user message's turn is doing, as its label says it. */
function turnStateOf(messageId, turn) {
  // Text arriving before the server's answer to the send came back: the message is being answered.
  if (state.outbox.get(messageId)?.sending && state.pending.length === 0) return turnLabel({ sending: true });
  const unfinished = turn?.status === "running" || turn?.status === "retrying" || isAwaitingApproval(turn?.status);
  // Ended in the log, not yet re-read: the thread's messages will say how.
  if (turn && state.endedRuns.has(turn.runId) && !state.awaiting.has(messageId))
    return unfinished ? turnLabel({}) : turnLabel(turn);
  if (unfinished || state.awaiting.has(messageId) || state.outbox.has(messageId)) {
    return turnLabel({
      status: turn?.status === "retrying" || isAwaitingApproval(turn?.status) ? turn.status : "running",
      error: turn?.error,
      retrying: retryOf(messageId, turn?.runId),
    });
  }
  return turnLabel({ status: turn?.status, error: turn?.error });
}

function renderLive() {
  const texts = streamedTexts(state.pending);
  $("live-answer").hidden = texts.length === 0;
  $("live-answer").replaceChildren(markdownNodes(texts.map((streamed) => streamed.text).join("\n\n")));
  $("stop").disabled = state.threadId === null || !running();
  const sending = [...state.outbox.entries()].find(([, entry]) => entry.sending);
  const current = runningMessageId() ?? sending?.[0];
  $("activity").textContent =
    current === undefined ? "" : turnStateOf(current, state.messages.find((m) => m.id === current)?.turn).text;
}

// Messages, answers and their variants

/** Renders and, when the reader was at the end of the conversation, keeps it there. */
function keepingScroll(render) {
  const scroller = $("scroller");
  const atEnd = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 48;
  render();
  if (atEnd) scrollToEnd();
}

function scrollToEnd() {
  $("scroller").scrollTop = $("scroller").scrollHeight;
}

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
  keepingScroll(() => {
    const items = turnsOf(state.messages).flatMap((turn) => (turn.other ? [otherItem(turn.other)] : turnItems(turn)));
    if (state.olderHidden) items.unshift(h("li", { class: "meta" }, "Older messages are not shown here."));
    for (const [id, { text }] of state.outbox) items.push(userItem({ id, text, label: turnStateOf(id) }));
    $("messages").replaceChildren(...items);
    renderLive();
  });
}

const otherItem = (message) =>
  h(
    "li",
    { class: `message ${message.role}` },
    h("div", { class: "meta" }, message.role),
    h("div", { class: "text" }, messageText(message)),
  );

/** A user message: who and when, its turn's state, its words (as typed), and what may follow (Retry). */
function userItem({ id, text, createdAt, label, tools = null }) {
  return h(
    "li",
    { class: "message user", "data-message-id": id },
    h(
      "div",
      { class: "meta" },
      createdAt ? `You · ${when(createdAt)}` : "You",
      label.text ? [" · ", h("span", { class: `turn-state ${label.kind}` }, label.text)] : null,
    ),
    h("div", { class: "text" }, text),
    tools,
  );
}

function turnItems({ user, answers }) {
  const label = turnStateOf(user.id, user.turn);
  const status = state.awaiting.has(user.id) ? "running" : user.turn?.status;
  // A failed turn, or one stopped before any text arrived (no answer carries Regenerate): Retry answers it.
  const retry =
    status === "failed" || (status === "stopped" && answers.length === 0)
      ? h(
          "p",
          { class: "tools" },
          button("Retry", () => regenerate(user.id)),
        )
      : null;
  const branchTools = h(
    "p",
    { class: "tools" },
    userBranchTools(user, {
      button,
      onEdit: (id) => {
        state.editing = { id, draft: user.content.text };
        renderMessages();
      },
      onSwitch: guarded(switchTo),
      disabled: running(),
    }),
  );
  const item = userItem({
    id: user.id,
    text: user.content.text,
    createdAt: user.createdAt,
    label,
    tools: [retry, ...(approvalCards(user.turn, guarded(decide)) ?? []), branchTools],
  });
  if (state.editing?.id === user.id) item.querySelector(".text").replaceWith(editingForm(user.id));
  if (answers.length === 0) return [item];
  // The thread shows its current answer; a variant the reader flipped to is shown in its place.
  const choice = state.variants.get(user.id);
  const flipped = choice && !choice.list[choice.index].current ? choice.list[choice.index] : null;
  const shown = flipped
    ? [
        {
          agentName: flipped.results[0]?.agentName ?? "assistant",
          text: flipped.results.map((r) => answerText(r.content)).join("\n\n"),
          stopped: flipped.stopped === true,
        },
      ]
    : answers.map((answer) => ({
        id: answer.id,
        agentName: answer.agentName,
        text: messageText(answer),
        stopped: answer.stopped === true,
        feedback: answer.feedback,
      }));
  const answerItems = shown.map(({ id, agentName, text, stopped, feedback }) =>
    h(
      "li",
      { class: "message assistant" },
      h("div", { class: "meta" }, agentName, stopped ? [" · ", stoppedLabel()] : null),
      h("div", { class: "markdown" }, markdownNodes(text)),
      // Thumbs on the answers the thread shows (a variant flipped to is read-only).
      id
        ? feedbackControls(
            feedback,
            guarded((rating) => rate(id, rating)),
          )
        : null,
    ),
  );
  // The turn's tokens and cost, when the current answer is shown (a flipped variant's are not read).
  const usage = flipped ? null : turnUsageLine(answers.at(-1).turnUsage);
  if (usage) answerItems.at(-1).append(usage);
  answerItems[answerItems.length - 1].append(answerTools(user.id, choice));
  return [item, ...answerItems];
}

const stoppedLabel = () =>
  h(
    "strong",
    { class: "stopped", title: "You stopped this answer: it is what the model had written by then." },
    "Stopped",
  );

/** Regenerate, and ‹ n/m › through the variants when there are several. */
function answerTools(messageId, choice) {
  const tools = h(
    "div",
    { class: "tools" },
    button("Regenerate", () => regenerate(messageId), { disabled: state.awaiting.has(messageId) }),
  );
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

/** Shows the previous or next answer variant and makes it the thread's current path (what follows it too). */
async function flip(messageId, step) {
  const choice = state.variants.get(messageId);
  choice.index = Math.min(Math.max(choice.index + step, 0), choice.list.length - 1);
  renderMessages();
  await switchTo(choice.list[choice.index].results[0].id);
}

// Branches: editing a message, switching the thread's path (branches.js)

/** Makes the branch through a message the thread's current path, and shows it. */
async function switchTo(messageId) {
  await state.api.makeCurrent(state.threadId, messageId);
  await loadMessages(state.threadId);
}

function editingForm(messageId) {
  return editForm(state.editing.draft, {
    onSave: guarded((content) => editMessage(messageId, content)),
    onCancel: () => {
      state.editing = null;
      renderMessages();
    },
    onInput: (draft) => {
      state.editing.draft = draft;
    },
  });
}

/** Sends the edit; the thread shows the messages before the edited one and the edit, answered. */
async function editMessage(editedId, content) {
  const threadId = state.threadId;
  const messageId = crypto.randomUUID();
  await sendAwaited(messageId, () => state.api.edit(threadId, editedId, messageId, content));
  state.editing = null;
  if (!state.awaiting.has(messageId)) return loadMessages(threadId);
  state.messages = messagesBeforeEdit(state.messages, editedId);
  state.outbox.set(messageId, { text: content, sending: false });
  renderMessages();
}

/**
 * Sends a request that starts a turn for `messageId`, awaited from before it is sent: the turn
 * may end (its stream.ended read from the log, forgetTurn) before the response arrives, and a
 * message awaited only after that would be awaited for good, the page busy. No longer awaited
 * when the response comes: its turn has ended, and the thread's messages show it.
 */
async function sendAwaited(messageId, request) {
  state.awaiting.add(messageId);
  try {
    await request();
  } catch (error) {
    state.awaiting.delete(messageId);
    throw error;
  }
}

async function rate(answerId, rating) {
  const threadId = state.threadId;
  const feedback = await rateAnswer(state.api, threadId, answerId, rating);
  const answer = state.messages.find((m) => m.id === answerId);
  if (threadId !== state.threadId || !answer) return;
  answer.feedback = feedback;
  renderMessages();
}

/** The user's decision on a tool call awaiting approval; the thread then shows the turn going on. */
async function decide(approvalId, decision) {
  const threadId = state.threadId;
  await state.api.decideApproval(threadId, approvalId, decision);
  await loadMessages(threadId);
}

async function regenerate(messageId) {
  await sendAwaited(messageId, () => state.api.regenerate(state.threadId, messageId));
  state.variants.delete(messageId);
  renderMessages();
}

// Renaming and deleting the open thread

function closeThreadForms() {
  $("rename-form").hidden = true;
  $("delete-confirm").hidden = true;
}

function startRename() {
  const open = state.threads.find((thread) => thread.id === state.threadId);
  closeThreadForms();
  $("rename-form").hidden = false;
  $("rename-form").elements.title.value = open?.title ?? "";
  $("rename-form").elements.title.focus();
  renderThreads();
}

async function rename(event) {
  event.preventDefault();
  await state.api.rename(state.threadId, event.currentTarget.elements.title.value.trim());
  closeThreadForms();
  await refreshThreads();
}

async function deleteOpenThread() {
  const threadId = state.threadId;
  await state.api.deleteThread(threadId);
  session.forgetStreamPosition(threadId);
  state.threads = state.threads.filter((thread) => thread.id !== threadId);
  closeThreadForms();
  history.pushState(null, "", location.pathname);
  closeThread();
  await refreshThreads();
}

// Sending, stopping, searching

async function send(event) {
  event.preventDefault();
  const form = event.currentTarget;
  const content = form.elements.content.value;
  if (content.trim() === "") return;
  const submit = form.querySelector("button[type=submit]");
  submit.disabled = true;
  try {
    if (state.threadId === null) {
      // A thread made first, so its event stream can be followed before the turn starts.
      const thread = await state.api.createThread();
      history.pushState(null, "", threadHash(thread.id));
      await openThread(thread.id);
    } else {
      await checkLog(state.threadId, { restart: true });
    }
    const messageId = crypto.randomUUID();
    state.outbox.set(messageId, { text: content, sending: true });
    form.elements.content.value = "";
    say("");
    renderMessages();
    scrollToEnd();
    try {
      await sendAwaited(messageId, () => state.api.send(state.threadId, messageId, content));
    } catch (error) {
      // Not accepted: the words go back to the composer.
      state.outbox.delete(messageId);
      if (form.elements.content.value === "") form.elements.content.value = content;
      renderMessages();
      throw error;
    }
    // Still in the outbox unless the thread's messages, read since, hold it (its turn may have ended).
    const sent = state.outbox.get(messageId);
    if (sent) sent.sending = false;
    renderMessages();
    await refreshThreads();
  } finally {
    submit.disabled = false;
  }
}

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
    savePosition();
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
            h(
              "a",
              { href: threadHash(hit.threadId) },
              snippetNodes(hit.snippet),
              h("small", {}, `${hit.role} · ${when(hit.createdAt)}${hit.onPath ? "" : " · replaced"}`),
            ),
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
// Enter sends, Shift+Enter starts a new line (and Enter that confirms an input method's composition is the IME's).
$("message").addEventListener("keydown", (event) => {
  if (event.key !== "Enter" || event.shiftKey || event.isComposing || event.altKey || event.ctrlKey || event.metaKey)
    return;
  event.preventDefault();
  $("composer").requestSubmit();
});
$("stop").addEventListener("click", guarded(stop));
$("rename").addEventListener("click", startRename);
$("rename-form").addEventListener("submit", guarded(rename));
$("rename-form").addEventListener("keydown", (event) => {
  if (event.key === "Escape") $("rename-cancel").click();
});
$("rename-cancel").addEventListener("click", () => {
  closeThreadForms();
  renderThreads();
});
$("delete").addEventListener("click", () => {
  closeThreadForms();
  $("delete-confirm").hidden = false;
  renderThreads();
  $("delete-no").focus();
});
$("delete-no").addEventListener("click", () => {
  closeThreadForms();
  renderThreads();
});
$("delete-yes").addEventListener("click", guarded(deleteOpenThread));
$("search").addEventListener("submit", guarded(search));
window.addEventListener("hashchange", guarded(showRoute));

const saved = session.loadCredentials();
if (saved !== null) guarded(signIn)(saved);
