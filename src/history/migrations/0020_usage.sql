-- Up Migration

-- The usage ledger (issue 21): one row per model call whose usage the provider reported, with the
-- turn it belongs to. The key is the attempt's (run id, step id, attempt): writing the same attempt
-- again inserts nothing, so a retried or replayed step counts once, and a billed attempt that then
-- failed keeps its own row. No foreign key to threads: what was spent stays spent when a thread is
-- deleted (budgets and the usage API still count it); erasing the user deletes the rows.
CREATE TABLE usage_records (
  key text PRIMARY KEY,
  user_id text NOT NULL,
  thread_id uuid NOT NULL,
  message_id uuid NOT NULL,
  -- The answer variant the turn writes (from the turn's row); NULL when the turn row is gone.
  variant integer,
  run_id text NOT NULL,
  step_id text NOT NULL,
  attempt integer NOT NULL,
  provider text NOT NULL,
  model text NOT NULL,
  input_tokens bigint NOT NULL CHECK (input_tokens >= 0),
  output_tokens bigint NOT NULL CHECK (output_tokens >= 0),
  cached_tokens bigint CHECK (cached_tokens >= 0),
  reasoning_tokens bigint CHECK (reasoning_tokens >= 0),
  latency_ms integer,
  -- From the price table when the call was recorded (NULL: the model has no price).
  cost_usd numeric(18, 9),
  -- The attempt failed after the provider reported usage (it was billed all the same).
  failed boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- The usage API and the budget check read one user's rows in a time range.
CREATE INDEX usage_records_user_idx ON usage_records (user_id, created_at);
-- The messages API reads an answer's turn usage; the feedback event a run's.
CREATE INDEX usage_records_message_idx ON usage_records (message_id, variant);
CREATE INDEX usage_records_run_idx ON usage_records (run_id);

-- Per-user budgets set by the operator (npm run budget); a user without a row has the configured
-- defaults. A NULL limit is no limit of that kind.
CREATE TABLE user_budgets (
  user_id text PRIMARY KEY,
  daily_tokens bigint CHECK (daily_tokens >= 0),
  monthly_tokens bigint CHECK (monthly_tokens >= 0),
  daily_cost_usd numeric(18, 9) CHECK (daily_cost_usd >= 0),
  monthly_cost_usd numeric(18, 9) CHECK (monthly_cost_usd >= 0),
  updated_at timestamptz NOT NULL DEFAULT now()
);
