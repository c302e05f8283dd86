-- Schema 8: every insert and update of an action stamps the row with a change number above
-- every earlier write's, so the tick's snapshot reads only the rows changed since its last
-- read (api.store.tick_io.LiveActions). The triggers that stamp differ between the two
-- databases, so api.store.migrations creates them after this file.
ALTER TABLE actions ADD COLUMN changed BIGINT NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS actions_changed ON actions (changed);
