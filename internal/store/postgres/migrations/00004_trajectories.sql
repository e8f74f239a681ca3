-- The trajectory store: one row per dispatched attempt of a tool call, no
-- parameter or output value. day is the UTC day the attempt ended, so that
-- a window reads only its days and retention deletes whole days.

-- +goose Up
CREATE TABLE car_trajectories (
    day         date             NOT NULL,
    at          timestamptz      NOT NULL,
    tool        text             NOT NULL,
    principal   text             NOT NULL,
    status      text             NOT NULL CHECK (status IN ('succeeded', 'failed')),
    duration_ms double precision NOT NULL,
    attempt     integer          NOT NULL
);
CREATE INDEX car_trajectories_day ON car_trajectories (day);

-- +goose Down
DROP TABLE car_trajectories;
