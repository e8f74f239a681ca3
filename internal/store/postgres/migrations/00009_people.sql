-- The people's own host-role tokens: the SHA-256 of each, never the
-- token. A decision made with one names the person (person:NAME).

-- +goose Up
CREATE TABLE car_people_tokens (
	name      text PRIMARY KEY,
	hash      text NOT NULL UNIQUE,
	issued_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE car_people_tokens;
