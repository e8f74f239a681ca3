-- The first schema of the shared store. Values are kept as json (the text
-- as written, numbers and key order untouched), never jsonb.

-- +goose Up
CREATE TABLE car_nodes (
	id             text PRIMARY KEY,
	version        text NOT NULL,
	started_at     timestamptz NOT NULL,
	last_heartbeat timestamptz NOT NULL
);

-- One current decision per fingerprint, and every decision ever made. A
-- row's seq is taken afresh from car_approval_seq at every write, under the
-- row's lock, so it grows in commit order: a cache keeps the highest.
CREATE SEQUENCE car_approval_seq;
CREATE TABLE car_approvals (
	fingerprint text PRIMARY KEY,
	record      json NOT NULL,
	recorded_at timestamptz NOT NULL,
	node        text NOT NULL,
	seq         bigint NOT NULL
);
CREATE TABLE car_approval_history (
	id          bigserial PRIMARY KEY,
	fingerprint text NOT NULL,
	record      json NOT NULL,
	recorded_at timestamptz NOT NULL,
	node        text NOT NULL
);
CREATE INDEX car_approval_history_fingerprint ON car_approval_history (fingerprint, id);

-- An idempotency key is claimed (holder, token and lease set, no output)
-- while its call runs, then done (output set). Rollback deletes the row. The
-- token names one claim (the holder's node may claim the key again after a
-- restart or a lost lease); Commit and Release are guarded by it.
CREATE TABLE car_idempotency (
	key          text PRIMARY KEY,
	tool         text NOT NULL,
	proposal_id  text NOT NULL,
	holder       text,
	token        text,
	lease_until  timestamptz,
	output       json,
	done         boolean NOT NULL DEFAULT false,
	recorded_at  timestamptz NOT NULL
);

CREATE TABLE car_messages (
	key         text PRIMARY KEY,
	channel     text NOT NULL,
	message_id  text,
	recorded_at timestamptz NOT NULL
);

-- Shared state: one row per (tenant, key); every write takes a fresh version.
CREATE SEQUENCE car_state_version;
CREATE TABLE car_state (
	tenant  text NOT NULL,
	key     text NOT NULL,
	value   json NOT NULL,
	version bigint NOT NULL,
	PRIMARY KEY (tenant, key)
);

-- The audit log: every daemon's events, each daemon with its own hash chain.
CREATE TABLE car_events (
	id          bigserial PRIMARY KEY,
	node        text NOT NULL,
	seq         bigint NOT NULL,
	at          timestamptz NOT NULL,
	kind        text NOT NULL,
	proposal_id text NOT NULL DEFAULT '',
	hash        text NOT NULL DEFAULT '',
	prev_hash   text NOT NULL DEFAULT '',
	body        json NOT NULL,
	UNIQUE (node, seq)
);
CREATE INDEX car_events_kind ON car_events (kind, id);
CREATE INDEX car_events_proposal ON car_events (proposal_id, id);
CREATE INDEX car_events_at ON car_events (at);

-- Live supervisor subscriptions anywhere in the cluster.
CREATE TABLE car_supervisors (
	node       text NOT NULL,
	session    text NOT NULL,
	filter     json,
	since      timestamptz NOT NULL,
	PRIMARY KEY (node, session)
);

-- +goose Down
DROP TABLE car_supervisors;
DROP TABLE car_events;
DROP TABLE car_state;
DROP SEQUENCE car_state_version;
DROP TABLE car_messages;
DROP TABLE car_idempotency;
DROP INDEX car_approval_history_fingerprint;
DROP TABLE car_approval_history;
DROP TABLE car_approvals;
DROP SEQUENCE car_approval_seq;
DROP TABLE car_nodes;
