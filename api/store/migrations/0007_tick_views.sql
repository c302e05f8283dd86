-- Schema 7: what the last tick shows readers beside its result, so every replica shows what
-- the leader shows (api.store.leadership): its blocked strict_fifo heads' explanations and
-- the actions it failed at their deadline (written with its write-back), and its waiting
-- actions' start forecasts (made after the write-back, then written). Each holds JSON, only
-- where other processes serve the database (PostgreSQL); on SQLite they stay NULL.
ALTER TABLE last_tick ADD COLUMN head_explanations TEXT;
ALTER TABLE last_tick ADD COLUMN deadline_exceeded TEXT;
ALTER TABLE last_tick ADD COLUMN forecasts TEXT;
