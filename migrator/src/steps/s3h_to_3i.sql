
-- Step 3h -> 3i: a usage record may carry its run's account (3i row 126).
-- SQLite cannot drop a CHECK, so the table is rebuilt in the order the spec
-- gives: the guards go first (they would refuse the copy and name the old
-- table), the table is renamed before the new one is made (a renamed
-- table's stored SQL quotes its new name, and the digest compares that
-- text), every row is copied with its seq, the table's AUTOINCREMENT
-- counter in sqlite_sequence is carried over (so no seq is ever handed out
-- twice), the old table goes (taking its indexes with it) and the indexes
-- and guards are made again with their 3h text. Only account's CHECK
-- differs. On a new store this runs on an empty table.
DROP TRIGGER usage_records_no_update;
DROP TRIGGER usage_records_no_delete;
DROP TRIGGER usage_records_no_replace;
ALTER TABLE usage_records RENAME TO usage_records_3h;
CREATE TABLE usage_records (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  business TEXT NOT NULL,
  run TEXT NOT NULL,
  role TEXT NOT NULL,
  turn TEXT NOT NULL REFERENCES messages(id),
  source TEXT NOT NULL CHECK (length(source) BETWEEN 1 AND 64),
  kind TEXT NOT NULL CHECK (kind IN ('baseline', 'known', 'unknown')),
  provider TEXT CHECK (provider IS NULL OR length(provider) BETWEEN 1 AND 128),
  model TEXT CHECK (model IS NULL OR length(model) BETWEEN 1 AND 128),
  input INTEGER CHECK (input IS NULL OR (typeof(input) = 'integer' AND input >= 0)),
  output INTEGER CHECK (output IS NULL OR (typeof(output) = 'integer' AND output >= 0)),
  cache_write INTEGER CHECK (cache_write IS NULL OR (typeof(cache_write) = 'integer' AND cache_write >= 0)),
  cache_read INTEGER CHECK (cache_read IS NULL OR (typeof(cache_read) = 'integer' AND cache_read >= 0)),
  baseline TEXT CHECK (baseline IS NULL OR (json_valid(baseline) AND json_type(baseline) = 'object')),
  code TEXT CHECK (code IS NULL OR length(code) BETWEEN 1 AND 64),
  account TEXT CHECK (account IS NULL OR length(account) BETWEEN 1 AND 256),
  at TEXT NOT NULL,
  CHECK ((kind = 'baseline') = (baseline IS NOT NULL)),
  CHECK ((kind = 'known') = (input IS NOT NULL AND output IS NOT NULL
    AND cache_write IS NOT NULL AND cache_read IS NOT NULL)),
  CHECK ((kind = 'unknown') = (code IS NOT NULL))
);
INSERT INTO usage_records(seq, business, run, role, turn, source, kind, provider, model,
    input, output, cache_write, cache_read, baseline, code, account, at)
  SELECT seq, business, run, role, turn, source, kind, provider, model,
    input, output, cache_write, cache_read, baseline, code, account, at
  FROM usage_records_3h ORDER BY seq;
DELETE FROM sqlite_sequence WHERE name = 'usage_records';
INSERT INTO sqlite_sequence(name, seq)
  SELECT 'usage_records', seq FROM sqlite_sequence WHERE name = 'usage_records_3h';
DROP TABLE usage_records_3h;
CREATE UNIQUE INDEX usage_records_baseline ON usage_records(run, source, turn) WHERE kind = 'baseline';
CREATE UNIQUE INDEX usage_records_outcome ON usage_records(run, source, turn) WHERE kind <> 'baseline';
CREATE INDEX usage_records_business ON usage_records(business, seq);
CREATE TRIGGER usage_records_no_update BEFORE UPDATE ON usage_records BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER usage_records_no_delete BEFORE DELETE ON usage_records BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER usage_records_no_replace BEFORE INSERT ON usage_records
  WHEN EXISTS (SELECT 1 FROM usage_records WHERE seq = NEW.seq)
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
