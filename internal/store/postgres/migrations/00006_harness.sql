-- The daemon-wide harness config: one JSON document in one row.

-- +goose Up
CREATE TABLE car_harness (
	id  smallint PRIMARY KEY CHECK (id = 1),
	doc jsonb NOT NULL
);

-- +goose Down
DROP TABLE car_harness;
