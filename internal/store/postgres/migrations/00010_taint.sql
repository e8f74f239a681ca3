-- The intent gate's taint ledger, shared by every daemon of a cluster: one
-- row per tainted state key of a tenant, with the action whose untrusted
-- data reached it.

-- +goose Up
CREATE TABLE car_taint (
	tenant      text NOT NULL,
	key         text NOT NULL,
	proposal_id text NOT NULL,
	action_id   text NOT NULL,
	tool        text NOT NULL DEFAULT '',
	origin      text NOT NULL,
	at          text NOT NULL,
	PRIMARY KEY (tenant, key)
);

-- +goose Down
DROP TABLE car_taint;
