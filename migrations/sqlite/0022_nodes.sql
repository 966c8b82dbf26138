-- One lab across machines (issue 29): each node records itself and beats.
CREATE TABLE nodes (
    id         TEXT PRIMARY KEY,
    -- where other nodes reach it (`lab serve --node-url`)
    url        TEXT NOT NULL,
    version    TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    last_seen  INTEGER NOT NULL,
    draining   BOOLEAN NOT NULL DEFAULT FALSE,
    -- a JSON domain::Capacity
    capacity   TEXT NOT NULL
);
