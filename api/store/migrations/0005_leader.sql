-- Schema 5: one replica ticks at a time. The lease names the replica that holds it, the
-- epoch it holds it at (each new holder's is one more) and when it ends, in seconds on the
-- database's clock; a tick's write-back and the leader's other writes commit only while
-- their epoch is the lease's. The last tick any leader wrote back is kept beside it, so
-- every replica shows and streams the same ticks.
CREATE TABLE IF NOT EXISTS leader_lease (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    holder TEXT,
    epoch INTEGER NOT NULL,
    expires_s REAL NOT NULL
);
INSERT INTO leader_lease (id, holder, epoch, expires_s) VALUES (1, NULL, 0, 0)
    ON CONFLICT (id) DO NOTHING;
CREATE TABLE IF NOT EXISTS last_tick (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    number INTEGER NOT NULL,                -- ticks written back since the database began
    epoch INTEGER NOT NULL,                 -- the leader's that wrote it
    finished_at TEXT,
    result TEXT                             -- models.result.TickResult as JSON
);
INSERT INTO last_tick (id, number, epoch) VALUES (1, 0, 0) ON CONFLICT (id) DO NOTHING;
