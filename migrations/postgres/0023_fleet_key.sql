-- One lab across machines (issue 29, ADR 34): the key nodes sign their
-- calls to one another with. One row, made by the first node that needs it;
-- it never leaves the database (a run sees neither the database nor its URL).
CREATE TABLE fleet_key (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    -- 32 random bytes, hex
    key TEXT NOT NULL
);
