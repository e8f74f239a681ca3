-- The agents' leases: one counter row per agent id. epoch is the last
-- epoch handed out and only grows; a release clears holder and expires_at
-- and keeps the row, so an epoch is never handed out twice.

-- +goose Up
CREATE TABLE car_leases (
	agent_id   text PRIMARY KEY,
	epoch      bigint NOT NULL CHECK (epoch > 0),
	holder     text,
	expires_at timestamptz
);

-- +goose Down
DROP TABLE car_leases;
