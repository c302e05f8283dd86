-- Schema 4: task templates, the queue each run was created with, and where each action's
-- queue came from (models.tasks.QueueSource; NULL for older rows, which is not known).
CREATE TABLE IF NOT EXISTS tasks (name TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS run_queues (run TEXT PRIMARY KEY, queue TEXT NOT NULL);
ALTER TABLE actions ADD COLUMN queue_source TEXT;
