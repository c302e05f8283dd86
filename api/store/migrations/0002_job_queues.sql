-- Schema 2: the quota-managed job queues.
CREATE TABLE IF NOT EXISTS scheduling_policies (name TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS service_environments (name TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS job_queues (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- creation order: the first queue keeps an environment
    name TEXT NOT NULL UNIQUE,
    service_environment TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- arrival order; a preempted job keeps it
    id TEXT NOT NULL UNIQUE,
    job_queue TEXT NOT NULL,
    share TEXT NOT NULL,
    phase TEXT NOT NULL,
    body TEXT NOT NULL,                     -- the Job as submitted (QUEUED)
    code TEXT,
    message TEXT,
    submitted_at TEXT NOT NULL,
    scheduled_at TEXT,                      -- when it got its instances (the model's started_at)
    started_at TEXT,                        -- when an executor said it started
    finished_at TEXT,
    preemptions INTEGER NOT NULL DEFAULT 0,
    preempted_at TEXT,
    preempt_reason TEXT,
    preempt_beneficiary TEXT,
    preempt_message TEXT
);
CREATE INDEX IF NOT EXISTS jobs_queue_phase ON jobs (job_queue, phase);
CREATE INDEX IF NOT EXISTS jobs_live ON jobs (seq)
    WHERE phase IN ('QUEUED', 'SCHEDULED', 'RUNNING');
