-- Whether user p_user_id was erased after p_sent (user_erasures, migration 0034, keyed by a digest
-- of the user id): a chat message sent then is not stored (threadline_begin_turn). False for no
-- time (an older instance's call). SQL, stable: the planner inlines it.
CREATE OR REPLACE FUNCTION threadline_user_erased_after(p_user_id text, p_sent timestamptz) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM user_erasures e WHERE e.user_key = sha256(convert_to(p_user_id, 'UTF8')) AND e.erased_at > p_sent)
$$;
