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

/**
 * Taken first: the user's erasure lock, exclusively, until the transaction ends. A turn creating a
 * thread for the user holds it shared (threadline_begin_turn), so the deletions below see every
 * thread created before and none is created until the erasure committed.
 */
export const lockUserErasure = `
  SELECT pg_advisory_xact_lock(hashtext('threadline.user_erasure'), hashtext($1))`;

/**
 * The same lock, shared: taken by a write in one of the user's threads that nothing else holds
 * back from an erasure (remembering a fact), so the erasure waits for it and erases what it wrote,
 * or it waits for the erasure and then finds the thread gone.
 */
export const shareUserErasureLock = `
  SELECT pg_advisory_xact_lock_shared(hashtext('threadline.user_erasure'), hashtext($1))`;

/**
 * A user's key where a record outlives the user's rows (user_erasures, memory_forgets): a digest of
 * the user id, never the id (threadline_user_erased_after computes the same).
 */
export const userKey = (param: string) => `sha256(convert_to(${param}, 'UTF8'))`;

/**
 * Written last, when the user's rows are gone: the erasure's time (its latest), under a digest of
 * the user id. A chat message sent before it is not stored (threadline_begin_turn).
 */
export const recordUserErasure = `
  INSERT INTO user_erasures (user_key, erased_at)
  VALUES (${userKey("$1")}, date_trunc('milliseconds', clock_timestamp()))
  ON CONFLICT (user_key) DO UPDATE SET erased_at = excluded.erased_at`;
