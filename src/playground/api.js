/**
 * Calls to Threadline's HTTP API as the signed-in user: a pasted token goes in
 * `Authorization: Bearer`, a dev user name (servers run with AUTH=dev) in X-Threadline-User.
 */
export class ApiError extends Error {
  /** `code`: the machine-readable reason some refusals carry (e.g. no_running_turn). */
  constructor(status, message, code) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
  }
}

export function authHeaders(credentials) {
  return credentials.kind === "token"
    ? { authorization: `Bearer ${credentials.value}` }
    : { "X-Threadline-User": utf8Bytes(credentials.value) };
}

/**
 * The name's UTF-8 bytes, one character each: fetch sends a header value's characters as bytes
 * (Latin-1), and refuses any beyond it, while the server reads the header as UTF-8.
 */
const utf8Bytes = (text) => String.fromCharCode(...new TextEncoder().encode(text));

/** The API as one user: each method answers the parsed JSON body, or throws ApiError with the server's message. */
export function apiFor(credentials) {
  async function call(method, path, body) {
    const headers = {
      ...authHeaders(credentials),
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    };
    const response = await fetch(path, {
      method,
      headers,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const answer = await response.json().catch(() => ({}));
    if (!response.ok)
      throw new ApiError(
        response.status,
        answer.error ?? `${method} ${path} answered HTTP ${response.status}`,
        answer.code,
      );
    return answer;
  }
  const thread = (threadId) => `/api/threads/${encodeURIComponent(threadId)}`;
  const message = (threadId, messageId) => `${thread(threadId)}/messages/${encodeURIComponent(messageId)}`;
  return {
    info: () => call("GET", "/api/info"),
    listThreads: () => call("GET", "/api/threads?limit=50"),
    /** A new thread; `id`: the thread again under the id it had (it was deleted elsewhere). */
    createThread: (id) => call("POST", "/api/threads", id === undefined ? {} : { id }),
    readThread: (threadId) => call("GET", thread(threadId)),
    rename: (threadId, title) => call("PATCH", thread(threadId), { title }),
    // With an empty JSON body: servers from before bodiless requests were accepted refuse a DELETE without one (415).
    deleteThread: (threadId) => call("DELETE", thread(threadId), {}),
    readMessages: (threadId) => call("GET", `${thread(threadId)}/messages?limit=200`),
    send: (threadId, messageId, content) => call("POST", "/api/chat", { threadId, messageId, content }),
    /** Stops the turn answering `messageId` (absent: whichever turn the thread is answering now). */
    stop: (threadId, messageId) =>
      call("POST", `${thread(threadId)}/stop`, messageId === undefined ? {} : { messageId }),
    regenerate: (threadId, messageId) =>
      call("POST", `${message(threadId, messageId)}/regenerate`, { requestId: crypto.randomUUID() }),
    /** The user's decision on a tool call awaiting approval: "approve" or "deny". */
    decideApproval: (threadId, approvalId, decision) =>
      call("POST", `${thread(threadId)}/approvals/${encodeURIComponent(approvalId)}`, {
        decision,
        requestId: crypto.randomUUID(),
      }),
    variants: (threadId, messageId) => call("GET", `${message(threadId, messageId)}/variants`),
    rateAnswer: (threadId, answerId, rating) => call("PUT", `${message(threadId, answerId)}/feedback`, { rating }),
    unrateAnswer: (threadId, answerId) => call("DELETE", `${message(threadId, answerId)}/feedback`, {}),
    /** A new user message `messageId` as an edit of `editedId` (a new branch; the old one is kept). */
    edit: (threadId, editedId, messageId, content) =>
      call("POST", `${message(threadId, editedId)}/edit`, { messageId, content }),
    /** Makes the branch through a message the thread's current path. */
    makeCurrent: (threadId, messageId) => call("PUT", `${message(threadId, messageId)}/current`),
    search: (q) => call("GET", `/api/search?q=${encodeURIComponent(q)}`),
  };
}
