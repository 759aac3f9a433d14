/**
 * Erasing a user: their threads (messages, turns, summaries, agent state and memories extracted
 * from them go with each thread, ON DELETE CASCADE) and their API keys. Memory components erase
 * their own rows first, in the same transaction.
 */
export const deleteUserThreads = `
  DELETE FROM threads WHERE user_id = $1 RETURNING id`;
export type DeleteUserThreadsRow = { id: string };

export const deleteUserApiKeys = `
  DELETE FROM api_keys WHERE user_id = $1`;
