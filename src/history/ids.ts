/**
 * Derived ids (UUIDv5): the same inputs give the same id, so a retried write stores nothing twice.
 * Stores nothing. Imports: uuid only.
 */
import { v5 as uuidv5 } from "uuid";

// Fixed namespace for Threadline's derived ids: the same inputs give the same id in every run.
const NAMESPACE = "5b0c2a3e-7f1d-4c8e-9a56-1d2f0e7b9c41";

/** An agent result's id: the user message it answers, the answer variant, its position in it. */
export const resultId = (messageId: string, variant: number, position: number) =>
  uuidv5(`result:${messageId}:${variant}:${position}`, NAMESPACE);

/** A summary's id as history returns it: one per extent of the thread it covers. */
export const summaryId = (threadId: string, coversThroughTurnSeq: number) =>
  uuidv5(`summary:${threadId}:${coversThroughTurnSeq}`, NAMESPACE);

/** A user's memory: the same fact (after normalizeMemoryText) is one memory, however often it is remembered. */
export const memoryId = (userId: string, normalizedText: string) =>
  uuidv5(`memory:${JSON.stringify([userId, normalizedText])}`, NAMESPACE);

/**
 * A user message's id when the client's own id is not a UUID (useChat's default ids): the same
 * client id in the same thread is always the same message, so re-sending it stores nothing twice.
 */
export const clientMessageId = (threadId: string, clientId: string) =>
  uuidv5(`client-message:${threadId}:${clientId}`, NAMESPACE);

/**
 * The new message of an edit that names no id of its own (useChat's edit sends the edited
 * message's id with the new words): the same edit sent again is the same message.
 */
export const editMessageId = (threadId: string, editedId: string, content: string) =>
  uuidv5(`edit:${threadId}:${JSON.stringify([editedId, content])}`, NAMESPACE);
