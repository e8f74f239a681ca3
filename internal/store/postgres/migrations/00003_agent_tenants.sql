-- The tenants an agent's token admits. NULL (every token issued before
-- this column, or one issued without --tenant) is the default tenant alone.

-- +goose Up
ALTER TABLE car_agent_tokens ADD COLUMN tenants text[];

-- +goose Down
ALTER TABLE car_agent_tokens DROP COLUMN tenants;
