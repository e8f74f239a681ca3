-- Agent run traces and agent identity. Records and documents are kept as
-- json (the text as written), never jsonb.

-- +goose Up

-- One row per run: its head. run_id is the run's idempotency key when its
-- agent gave one (unique across agents: a key of another agent's run is
-- refused), else a fresh id. owner is the connection that started it (or
-- started it again) and node that connection's daemon: a daemon restarting
-- marks incomplete only its own runs left in progress.
CREATE TABLE car_runs (
	run_id     text PRIMARY KEY,
	agent_id   text NOT NULL,
	intent     text NOT NULL,
	owner      text NOT NULL,
	node       text NOT NULL,
	status     text NOT NULL,
	started_at timestamptz NOT NULL,
	ended_at   timestamptz,
	outcome    json,
	turns      integer NOT NULL DEFAULT 0,
	records    integer NOT NULL DEFAULT 0
);
CREATE INDEX car_runs_agent ON car_runs (agent_id, started_at DESC);
CREATE INDEX car_runs_in_progress ON car_runs (node) WHERE status = 'in_progress';

-- A run's records, numbered from 0 (its started record) without a gap.
CREATE TABLE car_run_records (
	run_id text NOT NULL REFERENCES car_runs (run_id) ON DELETE CASCADE,
	seq    integer NOT NULL,
	record json NOT NULL,
	PRIMARY KEY (run_id, seq)
);

-- The agents' own tokens: the SHA-256 of each, never the token.
CREATE TABLE car_agent_tokens (
	agent_id  text PRIMARY KEY,
	hash      text NOT NULL,
	issued_at timestamptz NOT NULL
);

-- The per-agent posture policy: one document (the default posture and the
-- overrides), changed whole under its row lock; version grows with every
-- change, so a daemon's copy can tell it is behind.
CREATE TABLE car_agent_postures (
	id         boolean PRIMARY KEY DEFAULT true CHECK (id),
	policy     json NOT NULL,
	version    bigint NOT NULL,
	updated_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE car_agent_postures;
DROP TABLE car_agent_tokens;
DROP TABLE car_run_records;
DROP INDEX car_runs_in_progress;
DROP INDEX car_runs_agent;
DROP TABLE car_runs;
