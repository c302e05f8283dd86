-- Schema 3: triggers and their history; each action's deadline as a time (for expiry while
-- it runs; api.store.migrations fills it in for the live actions of an older file), and
-- each environment's idle timeout.
CREATE TABLE IF NOT EXISTS triggers (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: a re-created trigger's runs differ
    name TEXT NOT NULL UNIQUE,
    queue TEXT NOT NULL,
    body TEXT NOT NULL,                     -- the Trigger (models.triggers)
    created_at TEXT NOT NULL,               -- a fixed rate counts from here
    next_due TEXT                           -- NULL while paused
);
CREATE INDEX IF NOT EXISTS triggers_due ON triggers (next_due) WHERE next_due IS NOT NULL;
CREATE TABLE IF NOT EXISTS trigger_firings (
    trigger_seq INTEGER NOT NULL,
    scheduled_for TEXT NOT NULL,
    fired_at TEXT NOT NULL,
    outcome TEXT NOT NULL,
    run TEXT,
    missed INTEGER NOT NULL DEFAULT 0,
    message TEXT NOT NULL,
    PRIMARY KEY (trigger_seq, scheduled_for)  -- a scheduled time fires at most once
);
ALTER TABLE environments ADD COLUMN idle_timeout_s REAL;
ALTER TABLE actions ADD COLUMN deadline_at TEXT;
CREATE INDEX IF NOT EXISTS actions_deadline ON actions (deadline_at)
    WHERE deadline_at IS NOT NULL AND phase IN ('scheduled', 'running');
