-- One row per daemon that a synchronous commit writes when nothing else is
-- to be written but the WAL must be flushed past what the daemon committed
-- without waiting (a proposal's reply under journal_sync = proposal, the
-- event log's tail before a reply): a transaction that writes nothing does
-- not wait for the flush, so the flush writes this row.

-- +goose Up
CREATE TABLE car_flush (
	node    text PRIMARY KEY,
	flushes bigint NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE car_flush;
