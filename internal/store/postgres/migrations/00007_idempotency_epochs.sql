-- Fencing tokens of idempotency claims: epoch is the key's last claim's
-- epoch and only grows (1 for a key's first claim; 0 for a row claimed
-- before this migration). A release or a rollback no longer deletes the
-- row: it clears holder, token and output and keeps the epoch, so an epoch
-- is never handed out twice for one key.

-- +goose Up
ALTER TABLE car_idempotency ADD COLUMN epoch bigint NOT NULL DEFAULT 0 CHECK (epoch >= 0);

-- +goose Down
DELETE FROM car_idempotency WHERE NOT done AND token IS NULL;
ALTER TABLE car_idempotency DROP COLUMN epoch;
