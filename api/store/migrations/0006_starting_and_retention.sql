-- Schema 6: jobs have a STARTING phase between SCHEDULED and RUNNING, and it is live; and
-- what pruned finished actions counted is kept (api.store.retention), so the totals /metrics
-- reads never go down when rows go.
CREATE INDEX IF NOT EXISTS jobs_live_phases ON jobs (seq)
    WHERE phase IN ('QUEUED', 'SCHEDULED', 'STARTING', 'RUNNING');
DROP INDEX IF EXISTS jobs_live;
CREATE TABLE IF NOT EXISTS retired_totals (
    queue TEXT NOT NULL,
    name TEXT NOT NULL,                     -- submitted, scheduled, wait_sum_s,
    value REAL NOT NULL,                    -- wait_le:<seconds>, failed:<code>
    PRIMARY KEY (queue, name)
);
