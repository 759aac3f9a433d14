/**
 * What the page keeps in sessionStorage (this tab only, gone when it closes): the credentials,
 * and per thread where its event log was read to, so a reload resumes the stream where it was
 * and shows the text streamed before it.
 */
const CREDENTIALS = "threadline.credentials";
const streamKey = (threadId) => `threadline.stream.${threadId}`;

/** `{kind: "user" | "token", value}` or null when signed out. */
export function loadCredentials() {
  const saved = sessionStorage.getItem(CREDENTIALS);
  return saved === null ? null : JSON.parse(saved);
}

export function saveCredentials(credentials) {
  if (credentials === null) sessionStorage.removeItem(CREDENTIALS);
  else sessionStorage.setItem(CREDENTIALS, JSON.stringify(credentials));
}

/**
 * `{lastId, pending, retrying, epoch}`: the last event id seen, the delta rows and turn.retrying
 * data of turns not yet ended, and the thread's creation time when they were read (a thread
 * deleted and written again under its id has a new one, and a log that starts again at 1).
 */
export function loadStreamPosition(threadId) {
  const saved = sessionStorage.getItem(streamKey(threadId));
  return { lastId: 0, pending: [], retrying: [], epoch: null, ...(saved === null ? {} : JSON.parse(saved)) };
}

export function saveStreamPosition(threadId, position) {
  sessionStorage.setItem(streamKey(threadId), JSON.stringify(position));
}

export function forgetStreamPosition(threadId) {
  sessionStorage.removeItem(streamKey(threadId));
}

/** Signing out forgets every thread's position too: another user's threads are not this one's. */
export function forgetAll() {
  for (const key of Object.keys(sessionStorage)) if (key.startsWith("threadline.")) sessionStorage.removeItem(key);
}
