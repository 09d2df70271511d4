
-- Step 3g -> 3h: token accounting per run (3i row 124, REQ-LIMIT-4). One
-- append-only table of usage readings, nothing else, and no existing row
-- changes. Each row belongs to one run's turn (the delivered message the
-- runner names) and one usage source. Three kinds: a 'baseline' taken when
-- the turn begins (a small JSON object the source defines, never transcript
-- text), and at most one outcome when it ends: 'known' with all four token
-- counts, or 'unknown' with a fixed code. The two partial unique indexes
-- make a replayed begin or end find the recorded row instead of charging
-- again. account is reserved (always NULL) until 3i. The at column is the
-- broker clock's, as everywhere; the table has exactly the three
-- append-only guards the spec names and no timestamp trigger (the open-time
-- scan still checks every row's at).
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
  account TEXT CHECK (account IS NULL),
  at TEXT NOT NULL,
  CHECK ((kind = 'baseline') = (baseline IS NOT NULL)),
  CHECK ((kind = 'known') = (input IS NOT NULL AND output IS NOT NULL
    AND cache_write IS NOT NULL AND cache_read IS NOT NULL)),
  CHECK ((kind = 'unknown') = (code IS NOT NULL))
);
CREATE UNIQUE INDEX usage_records_baseline ON usage_records(run, source, turn) WHERE kind = 'baseline';
CREATE UNIQUE INDEX usage_records_outcome ON usage_records(run, source, turn) WHERE kind <> 'baseline';
CREATE INDEX usage_records_business ON usage_records(business, seq);
CREATE TRIGGER usage_records_no_update BEFORE UPDATE ON usage_records BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER usage_records_no_delete BEFORE DELETE ON usage_records BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER usage_records_no_replace BEFORE INSERT ON usage_records
  WHEN EXISTS (SELECT 1 FROM usage_records WHERE seq = NEW.seq)
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
