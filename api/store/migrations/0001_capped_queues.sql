-- Schema 1: settings, the capped queues, clusters, reusable environments and actions.
-- Written for SQLite; api.store.migrations renders it for PostgreSQL. IF NOT EXISTS
-- throughout, so a file an older Sluice made with some of these already opens.
CREATE TABLE IF NOT EXISTS settings (id INTEGER PRIMARY KEY CHECK (id = 1), body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS queues (
    name TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    draining INTEGER NOT NULL DEFAULT 0,
    head_blocked_since TEXT
);
CREATE TABLE IF NOT EXISTS clusters (name TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS environments (
    name TEXT PRIMARY KEY,
    queue TEXT NOT NULL,
    body TEXT NOT NULL,
    running INTEGER NOT NULL DEFAULT 0,
    placement TEXT,
    cluster TEXT
);
CREATE TABLE IF NOT EXISTS actions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    queue TEXT NOT NULL,
    phase TEXT NOT NULL,
    body TEXT NOT NULL,
    environment TEXT,
    placement TEXT,
    cluster TEXT,
    code TEXT,
    message TEXT,
    submitted_at TEXT NOT NULL,
    scheduled_at TEXT,
    started_at TEXT,
    finished_at TEXT
);
CREATE INDEX IF NOT EXISTS actions_queue_phase ON actions (queue, phase);
CREATE INDEX IF NOT EXISTS actions_live ON actions (seq)
    WHERE phase IN ('queued', 'scheduled', 'running');
