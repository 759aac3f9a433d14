/**
 * What the page keeps in sessionStorage (this tab only, gone when it closes): the credentials,
 * and per thread the last event id seen with the deltas of turns still running, so a reload
 * resumes the stream where it was and shows the text streamed before it.
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

/** `{lastId, pending}`: the last event id seen and the rows of turns not yet ended. */
export function loadStreamPosition(threadId) {
  const saved = sessionStorage.getItem(streamKey(threadId));
  return saved === null ? { lastId: 0, pending: [] } : JSON.parse(saved);
}

export function saveStreamPosition(threadId, position) {
  sessionStorage.setItem(streamKey(threadId), JSON.stringify(position));
}

/** Signing out forgets every thread's position too: another user's threads are not this one's. */
export function forgetAll() {
  for (const key of Object.keys(sessionStorage)) if (key.startsWith("threadline.")) sessionStorage.removeItem(key);
}
