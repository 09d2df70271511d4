
-- Step 3h -> 3i: a usage record may carry its run's account (3i row 126),
-- and the store takes its 3i physical layout (issue 34; docs/decisions.md,
-- "Schema 3i: the physical layout"). SQLite can change neither a CHECK
-- nor AUTOINCREMENT in place, so every evidence table is rebuilt:
-- - the views and every guard (trigger) go first, since a table they name
--   is dropped and made again below;
-- - each table is made anew without AUTOINCREMENT under a temporary name,
--   takes every row with its seq, and replaces the old one (dropping a
--   table drops its indexes). Every seq stays; rows are never deleted, so
--   the largest seq plus one, which INTEGER PRIMARY KEY hands out, has
--   never been used (the migrator first checks that no table's
--   sqlite_sequence counter is ahead of its rows). usage_records' account
--   may now hold 1 to 256 characters; nothing else about a column changes,
--   and the columns keep their order;
-- - the indexes come back; the three secondary indexes of events now
--   leave out a send's authorization (an action.allowed whose body starts
--   {"action":"message.send",): no read finds those through them, and
--   leaving them out saves a send three index pages; role_claims gains
--   role_claims_decision (the revokes citing a decision: trail of a
--   decision looked for them through the whole table);
-- - events' id index leaves a send's authorization out too (the same
--   condition), so a send writes no id index entry for it: every read and
--   every guard that finds an event by id names the condition, and the
--   two columns that name an event by id (messages.request,
--   decision_events.input) are checked by their guards, which already ask
--   for a human.input of the same business, instead of by a foreign key
--   (SQLite wants a whole unique index under a foreign key's parent);
-- - the guards come back in the order they had, so the same one fires
--   first; the timestamp guards test the canonical form with datetime()
--   instead of strftime() (the same rule, see the decision);
-- - the views come back unchanged.
-- On a new store this runs on empty tables.

DROP VIEW message_state;
DROP VIEW decision_state;
DROP VIEW role_holders;
DROP VIEW role_current;
DROP VIEW task_current;
DROP TRIGGER events_no_update;
DROP TRIGGER events_no_delete;
DROP TRIGGER events_no_replace;
DROP TRIGGER decisions_no_update;
DROP TRIGGER decisions_no_delete;
DROP TRIGGER decisions_no_replace;
DROP TRIGGER decision_events_no_update;
DROP TRIGGER decision_events_no_delete;
DROP TRIGGER decision_events_no_replace;
DROP TRIGGER role_claims_no_update;
DROP TRIGGER role_claims_no_delete;
DROP TRIGGER role_claims_no_replace;
DROP TRIGGER messages_no_update;
DROP TRIGGER messages_no_delete;
DROP TRIGGER messages_no_replace;
DROP TRIGGER deliveries_no_update;
DROP TRIGGER deliveries_no_delete;
DROP TRIGGER deliveries_no_replace;
DROP TRIGGER read_receipts_no_update;
DROP TRIGGER read_receipts_no_delete;
DROP TRIGGER read_receipts_no_replace;
DROP TRIGGER task_snapshots_no_update;
DROP TRIGGER task_snapshots_no_delete;
DROP TRIGGER task_snapshots_no_replace;
DROP TRIGGER events_at;
DROP TRIGGER decisions_at;
DROP TRIGGER decision_events_at;
DROP TRIGGER role_claims_at;
DROP TRIGGER messages_at;
DROP TRIGGER deliveries_at;
DROP TRIGGER read_receipts_at;
DROP TRIGGER task_snapshots_at;
DROP TRIGGER role_claims_one_holder;
DROP TRIGGER role_claims_release_by_holder;
DROP TRIGGER role_claims_revoked_run;
DROP TRIGGER messages_same_business;
DROP TRIGGER read_receipts_by_recipient;
DROP TRIGGER events_task_subject;
DROP TRIGGER decision_events_same_business;
DROP TRIGGER task_comment_cursors_no_update;
DROP TRIGGER task_comment_cursors_no_delete;
DROP TRIGGER task_comment_cursors_no_replace;
DROP TRIGGER task_comment_cursors_increase;
DROP TRIGGER role_revoke_needs_decision;
DROP TRIGGER projects_one_name;
DROP TRIGGER threads_one_name;
DROP TRIGGER threads_same_business;
DROP TRIGGER thread_claims_same_business;
DROP TRIGGER thread_one_holder;
DROP TRIGGER thread_one_per_run;
DROP TRIGGER thread_release_by_holder;
DROP TRIGGER thread_revoked_run;
DROP TRIGGER thread_revoke_needs_decision;
DROP TRIGGER message_threads_match;
DROP TRIGGER delivery_same_thread;
DROP TRIGGER projects_no_update;
DROP TRIGGER projects_no_delete;
DROP TRIGGER projects_no_replace;
DROP TRIGGER threads_no_update;
DROP TRIGGER threads_no_delete;
DROP TRIGGER threads_no_replace;
DROP TRIGGER thread_claims_no_update;
DROP TRIGGER thread_claims_no_delete;
DROP TRIGGER thread_claims_no_replace;
DROP TRIGGER message_threads_no_update;
DROP TRIGGER message_threads_no_delete;
DROP TRIGGER message_threads_no_replace;
DROP TRIGGER thread_opens_no_update;
DROP TRIGGER thread_opens_no_delete;
DROP TRIGGER thread_opens_no_replace;
DROP TRIGGER projects_at;
DROP TRIGGER threads_at;
DROP TRIGGER thread_claims_at;
DROP TRIGGER message_threads_at;
DROP TRIGGER thread_opens_at;
DROP TRIGGER decisions_spec_citation;
DROP TRIGGER instance_names_taken;
DROP TRIGGER messages_class;
DROP TRIGGER instance_names_no_update;
DROP TRIGGER instance_names_no_delete;
DROP TRIGGER instance_names_no_replace;
DROP TRIGGER instance_names_at;
DROP TRIGGER usage_records_no_update;
DROP TRIGGER usage_records_no_delete;
DROP TRIGGER usage_records_no_replace;
CREATE TABLE events_3i (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL,
  business TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (length(kind) BETWEEN 3 AND 64),
  role TEXT,
  run TEXT,
  subject TEXT,
  body TEXT NOT NULL CHECK (json_valid(body) AND json_type(body) = 'object'),
  at TEXT NOT NULL
);
INSERT INTO events_3i(seq, id, business, kind, role, run, subject, body, at)
  SELECT seq, id, business, kind, role, run, subject, body, at FROM events ORDER BY seq;
DROP TABLE events;
ALTER TABLE events_3i RENAME TO events;
CREATE TABLE decisions_3i (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  business TEXT NOT NULL,
  raised_by_role TEXT NOT NULL,
  raised_by_run TEXT NOT NULL,
  action TEXT NOT NULL,
  target TEXT,
  class TEXT NOT NULL CHECK (class IN ('within-role', 'cross-role', 'gated')),
  routed_to TEXT NOT NULL,
  domain TEXT,
  question TEXT NOT NULL,
  options TEXT NOT NULL CHECK (json_valid(options) AND json_type(options) = 'array'),
  recommendation TEXT NOT NULL,
  approval_choice TEXT NOT NULL,
  blocking INTEGER NOT NULL CHECK (blocking IN (0, 1)),
  project TEXT,
  task_ref TEXT,
  requirement_ref TEXT,
  supersedes TEXT REFERENCES decisions(id),
  target_holder TEXT,
  at TEXT NOT NULL,
  spec_path TEXT CHECK (spec_path IS NULL OR spec_path = 'spec/north-star.md'),
  spec_commit TEXT CHECK (spec_commit IS NULL OR (length(spec_commit) = 40
    AND spec_commit NOT GLOB '*[^0-9a-f]*'))
);
INSERT INTO decisions_3i(seq, id, business, raised_by_role, raised_by_run, action, target, class, routed_to, domain, question, options, recommendation, approval_choice, blocking, project, task_ref, requirement_ref, supersedes, target_holder, at, spec_path, spec_commit)
  SELECT seq, id, business, raised_by_role, raised_by_run, action, target, class, routed_to, domain, question, options, recommendation, approval_choice, blocking, project, task_ref, requirement_ref, supersedes, target_holder, at, spec_path, spec_commit FROM decisions ORDER BY seq;
DROP TABLE decisions;
ALTER TABLE decisions_3i RENAME TO decisions;
CREATE TABLE decision_events_3i (
  seq INTEGER PRIMARY KEY,
  decision TEXT NOT NULL REFERENCES decisions(id),
  kind TEXT NOT NULL CHECK (kind IN ('resolved', 'seen', 'withdrawn', 'consumed')),
  by TEXT NOT NULL,
  run TEXT,
  choice TEXT,
  note TEXT,
  input TEXT,
  at TEXT NOT NULL
);
INSERT INTO decision_events_3i(seq, decision, kind, by, run, choice, note, input, at)
  SELECT seq, decision, kind, by, run, choice, note, input, at FROM decision_events ORDER BY seq;
DROP TABLE decision_events;
ALTER TABLE decision_events_3i RENAME TO decision_events;
CREATE TABLE role_claims_3i (
  seq INTEGER PRIMARY KEY,
  business TEXT NOT NULL,
  role TEXT NOT NULL,
  run TEXT NOT NULL,
  op TEXT NOT NULL CHECK (op IN ('claim', 'release', 'revoke')),
  decision TEXT REFERENCES decisions(id),
  by TEXT,
  at TEXT NOT NULL,
  reason TEXT CHECK (reason IS NULL OR length(reason) BETWEEN 1 AND 500)
);
INSERT INTO role_claims_3i(seq, business, role, run, op, decision, by, at, reason)
  SELECT seq, business, role, run, op, decision, by, at, reason FROM role_claims ORDER BY seq;
DROP TABLE role_claims;
ALTER TABLE role_claims_3i RENAME TO role_claims;
CREATE TABLE messages_3i (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  business TEXT NOT NULL,
  from_role TEXT NOT NULL,
  from_run TEXT NOT NULL,
  to_role TEXT NOT NULL,
  class TEXT NOT NULL,
  body TEXT NOT NULL,
  in_reply_to TEXT REFERENCES messages(id),
  corrects TEXT REFERENCES messages(id),
  decision TEXT REFERENCES decisions(id),
  request TEXT,
  at TEXT NOT NULL,
  to_name TEXT CHECK (to_name IS NULL OR length(to_name) BETWEEN 1 AND 64)
);
INSERT INTO messages_3i(seq, id, business, from_role, from_run, to_role, class, body, in_reply_to, corrects, decision, request, at, to_name)
  SELECT seq, id, business, from_role, from_run, to_role, class, body, in_reply_to, corrects, decision, request, at, to_name FROM messages ORDER BY seq;
DROP TABLE messages;
ALTER TABLE messages_3i RENAME TO messages;
CREATE TABLE deliveries_3i (
  seq INTEGER PRIMARY KEY,
  message TEXT NOT NULL UNIQUE REFERENCES messages(id),
  run TEXT NOT NULL,
  at TEXT NOT NULL
);
INSERT INTO deliveries_3i(seq, message, run, at)
  SELECT seq, message, run, at FROM deliveries ORDER BY seq;
DROP TABLE deliveries;
ALTER TABLE deliveries_3i RENAME TO deliveries;
CREATE TABLE read_receipts_3i (
  seq INTEGER PRIMARY KEY,
  message TEXT NOT NULL UNIQUE REFERENCES messages(id),
  run TEXT NOT NULL,
  at TEXT NOT NULL
);
INSERT INTO read_receipts_3i(seq, message, run, at)
  SELECT seq, message, run, at FROM read_receipts ORDER BY seq;
DROP TABLE read_receipts;
ALTER TABLE read_receipts_3i RENAME TO read_receipts;
CREATE TABLE task_snapshots_3i (
  seq INTEGER PRIMARY KEY,
  business TEXT NOT NULL,
  task_ref TEXT NOT NULL,
  read_at TEXT NOT NULL,
  tombstone INTEGER NOT NULL CHECK (tombstone IN (0, 1)),
  fields TEXT CHECK (fields IS NULL OR (json_valid(fields) AND json_type(fields) = 'object')),
  at TEXT NOT NULL,
  CHECK ((tombstone = 1) = (fields IS NULL))
);
INSERT INTO task_snapshots_3i(seq, business, task_ref, read_at, tombstone, fields, at)
  SELECT seq, business, task_ref, read_at, tombstone, fields, at FROM task_snapshots ORDER BY seq;
DROP TABLE task_snapshots;
ALTER TABLE task_snapshots_3i RENAME TO task_snapshots;
CREATE TABLE task_comment_cursors_3i (
  seq INTEGER PRIMARY KEY,
  business TEXT NOT NULL,
  task_id INTEGER NOT NULL CHECK (typeof(task_id) = 'integer' AND task_id > 0),
  last_comment INTEGER NOT NULL CHECK (typeof(last_comment) = 'integer' AND last_comment > 0)
);
INSERT INTO task_comment_cursors_3i(seq, business, task_id, last_comment)
  SELECT seq, business, task_id, last_comment FROM task_comment_cursors ORDER BY seq;
DROP TABLE task_comment_cursors;
ALTER TABLE task_comment_cursors_3i RENAME TO task_comment_cursors;
CREATE TABLE projects_3i (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  business TEXT NOT NULL,
  name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  repo TEXT,
  by TEXT NOT NULL,
  at TEXT NOT NULL
);
INSERT INTO projects_3i(seq, id, business, name, repo, by, at)
  SELECT seq, id, business, name, repo, by, at FROM projects ORDER BY seq;
DROP TABLE projects;
ALTER TABLE projects_3i RENAME TO projects;
CREATE TABLE threads_3i (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  business TEXT NOT NULL,
  project TEXT NOT NULL REFERENCES projects(id),
  instance TEXT NOT NULL,
  user TEXT NOT NULL,
  name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  at TEXT NOT NULL
);
INSERT INTO threads_3i(seq, id, business, project, instance, user, name, at)
  SELECT seq, id, business, project, instance, user, name, at FROM threads ORDER BY seq;
DROP TABLE threads;
ALTER TABLE threads_3i RENAME TO threads;
CREATE TABLE thread_claims_3i (
  seq INTEGER PRIMARY KEY,
  business TEXT NOT NULL,
  thread TEXT NOT NULL REFERENCES threads(id),
  run TEXT NOT NULL,
  op TEXT NOT NULL CHECK (op IN ('claim', 'release', 'revoke')),
  decision TEXT REFERENCES decisions(id),
  reason TEXT CHECK (reason IS NULL OR length(reason) BETWEEN 1 AND 500),
  by TEXT,
  at TEXT NOT NULL
);
INSERT INTO thread_claims_3i(seq, business, thread, run, op, decision, reason, by, at)
  SELECT seq, business, thread, run, op, decision, reason, by, at FROM thread_claims ORDER BY seq;
DROP TABLE thread_claims;
ALTER TABLE thread_claims_3i RENAME TO thread_claims;
CREATE TABLE message_threads_3i (
  seq INTEGER PRIMARY KEY,
  message TEXT NOT NULL UNIQUE REFERENCES messages(id),
  thread TEXT NOT NULL REFERENCES threads(id),
  at TEXT NOT NULL
);
INSERT INTO message_threads_3i(seq, message, thread, at)
  SELECT seq, message, thread, at FROM message_threads ORDER BY seq;
DROP TABLE message_threads;
ALTER TABLE message_threads_3i RENAME TO message_threads;
CREATE TABLE thread_opens_3i (
  seq INTEGER PRIMARY KEY,
  thread TEXT NOT NULL REFERENCES threads(id),
  by TEXT NOT NULL,
  at TEXT NOT NULL
);
INSERT INTO thread_opens_3i(seq, thread, by, at)
  SELECT seq, thread, by, at FROM thread_opens ORDER BY seq;
DROP TABLE thread_opens;
ALTER TABLE thread_opens_3i RENAME TO thread_opens;
CREATE TABLE instance_names_3i (
  seq INTEGER PRIMARY KEY,
  business TEXT NOT NULL,
  instance TEXT NOT NULL CHECK (length(instance) BETWEEN 1 AND 64),
  name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
  by_role TEXT NOT NULL,
  by_run TEXT NOT NULL,
  at TEXT NOT NULL
);
INSERT INTO instance_names_3i(seq, business, instance, name, by_role, by_run, at)
  SELECT seq, business, instance, name, by_role, by_run, at FROM instance_names ORDER BY seq;
DROP TABLE instance_names;
ALTER TABLE instance_names_3i RENAME TO instance_names;
CREATE TABLE usage_records_3i (
  seq INTEGER PRIMARY KEY,
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
INSERT INTO usage_records_3i(seq, business, run, role, turn, source, kind, provider, model, input, output, cache_write, cache_read, baseline, code, account, at)
  SELECT seq, business, run, role, turn, source, kind, provider, model, input, output, cache_write, cache_read, baseline, code, account, at FROM usage_records ORDER BY seq;
DROP TABLE usage_records;
ALTER TABLE usage_records_3i RENAME TO usage_records;
CREATE UNIQUE INDEX events_id ON events(id) WHERE (kind <> 'action.allowed' OR body < '{"action":"message.send",' OR body >= '{"action":"message.send"-');
CREATE INDEX events_subject ON events(subject, seq) WHERE subject IS NOT NULL AND (kind <> 'action.allowed' OR body < '{"action":"message.send",' OR body >= '{"action":"message.send"-');
CREATE INDEX events_run ON events(business, run, kind) WHERE run IS NOT NULL AND (kind <> 'action.allowed' OR body < '{"action":"message.send",' OR body >= '{"action":"message.send"-');
CREATE INDEX events_kind ON events(business, kind, seq) WHERE (kind <> 'action.allowed' OR body < '{"action":"message.send",' OR body >= '{"action":"message.send"-');
CREATE INDEX decisions_route ON decisions(business, routed_to, seq);
CREATE INDEX decisions_task ON decisions(task_ref) WHERE task_ref IS NOT NULL;
CREATE INDEX decision_events_decision ON decision_events(decision, seq);
CREATE UNIQUE INDEX decision_events_one_close ON decision_events(decision)
  WHERE kind IN ('resolved', 'withdrawn');
CREATE UNIQUE INDEX decision_events_one_use ON decision_events(decision)
  WHERE kind = 'consumed';
CREATE INDEX role_claims_role ON role_claims(business, role, seq);
CREATE INDEX role_claims_run ON role_claims(run, seq);
CREATE INDEX role_claims_decision ON role_claims(decision, seq) WHERE decision IS NOT NULL;
CREATE INDEX messages_to ON messages(business, to_role, seq);
CREATE INDEX messages_reply ON messages(in_reply_to, seq) WHERE in_reply_to IS NOT NULL;
CREATE INDEX messages_decision ON messages(decision, seq) WHERE decision IS NOT NULL;
CREATE INDEX deliveries_run ON deliveries(run, seq);
CREATE INDEX task_snapshots_ref ON task_snapshots(business, task_ref, seq);
CREATE INDEX task_comment_cursors_task ON task_comment_cursors(business, task_id, seq);
CREATE INDEX projects_business ON projects(business, name);
CREATE INDEX threads_project ON threads(project, name);
CREATE INDEX threads_user ON threads(business, user, seq);
CREATE INDEX thread_claims_thread ON thread_claims(thread, seq);
CREATE INDEX thread_claims_run ON thread_claims(run, seq);
CREATE INDEX message_threads_thread ON message_threads(thread, seq);
CREATE INDEX thread_opens_thread ON thread_opens(thread, seq);
CREATE INDEX instance_names_name ON instance_names(business, name, seq);
CREATE INDEX instance_names_instance ON instance_names(business, instance, seq);
CREATE UNIQUE INDEX usage_records_baseline ON usage_records(run, source, turn) WHERE kind = 'baseline';
CREATE UNIQUE INDEX usage_records_outcome ON usage_records(run, source, turn) WHERE kind <> 'baseline';
CREATE INDEX usage_records_business ON usage_records(business, seq);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER events_no_replace BEFORE INSERT ON events
  WHEN EXISTS (SELECT 1 FROM events WHERE seq = NEW.seq)
    OR EXISTS (SELECT 1 FROM events WHERE id = NEW.id AND (kind <> 'action.allowed' OR body < '{"action":"message.send",' OR body >= '{"action":"message.send"-'))
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER decisions_no_update BEFORE UPDATE ON decisions BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER decisions_no_delete BEFORE DELETE ON decisions BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER decisions_no_replace BEFORE INSERT ON decisions
  WHEN EXISTS (SELECT 1 FROM decisions WHERE seq = NEW.seq OR id = NEW.id)
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER decision_events_no_update BEFORE UPDATE ON decision_events BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER decision_events_no_delete BEFORE DELETE ON decision_events BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER decision_events_no_replace BEFORE INSERT ON decision_events
  WHEN EXISTS (SELECT 1 FROM decision_events WHERE seq = NEW.seq)
    OR (NEW.kind IN ('resolved', 'withdrawn') AND EXISTS (SELECT 1 FROM decision_events
        WHERE decision = NEW.decision AND kind IN ('resolved', 'withdrawn')))
    OR (NEW.kind = 'consumed' AND EXISTS (SELECT 1 FROM decision_events
        WHERE decision = NEW.decision AND kind = 'consumed'))
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER role_claims_no_update BEFORE UPDATE ON role_claims BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER role_claims_no_delete BEFORE DELETE ON role_claims BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER role_claims_no_replace BEFORE INSERT ON role_claims
  WHEN EXISTS (SELECT 1 FROM role_claims WHERE seq = NEW.seq)
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER messages_no_update BEFORE UPDATE ON messages BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER messages_no_delete BEFORE DELETE ON messages BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER messages_no_replace BEFORE INSERT ON messages
  WHEN EXISTS (SELECT 1 FROM messages WHERE seq = NEW.seq OR id = NEW.id)
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER deliveries_no_update BEFORE UPDATE ON deliveries BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER deliveries_no_delete BEFORE DELETE ON deliveries BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER deliveries_no_replace BEFORE INSERT ON deliveries
  WHEN EXISTS (SELECT 1 FROM deliveries WHERE seq = NEW.seq OR message = NEW.message)
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER read_receipts_no_update BEFORE UPDATE ON read_receipts BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER read_receipts_no_delete BEFORE DELETE ON read_receipts BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER read_receipts_no_replace BEFORE INSERT ON read_receipts
  WHEN EXISTS (SELECT 1 FROM read_receipts WHERE seq = NEW.seq OR message = NEW.message)
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER task_snapshots_no_update BEFORE UPDATE ON task_snapshots BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER task_snapshots_no_delete BEFORE DELETE ON task_snapshots BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER task_snapshots_no_replace BEFORE INSERT ON task_snapshots
  WHEN EXISTS (SELECT 1 FROM task_snapshots WHERE seq = NEW.seq)
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER events_at BEFORE INSERT ON events
  WHEN NEW.at < '0' OR NEW.at IS NOT replace(datetime(NEW.at, '+0 days', 'subsec'), ' ', 'T') || 'Z'
    OR NEW.at <= (SELECT at FROM events ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'timestamp'); END;
CREATE TRIGGER decisions_at BEFORE INSERT ON decisions
  WHEN NEW.at < '0' OR NEW.at IS NOT replace(datetime(NEW.at, '+0 days', 'subsec'), ' ', 'T') || 'Z'
    OR NEW.at <= (SELECT at FROM decisions ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'timestamp'); END;
CREATE TRIGGER decision_events_at BEFORE INSERT ON decision_events
  WHEN NEW.at < '0' OR NEW.at IS NOT replace(datetime(NEW.at, '+0 days', 'subsec'), ' ', 'T') || 'Z'
    OR NEW.at <= (SELECT at FROM decision_events ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'timestamp'); END;
CREATE TRIGGER role_claims_at BEFORE INSERT ON role_claims
  WHEN NEW.at < '0' OR NEW.at IS NOT replace(datetime(NEW.at, '+0 days', 'subsec'), ' ', 'T') || 'Z'
    OR NEW.at <= (SELECT at FROM role_claims ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'timestamp'); END;
CREATE TRIGGER messages_at BEFORE INSERT ON messages
  WHEN NEW.at < '0' OR NEW.at IS NOT replace(datetime(NEW.at, '+0 days', 'subsec'), ' ', 'T') || 'Z'
    OR NEW.at <= (SELECT at FROM messages ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'timestamp'); END;
CREATE TRIGGER deliveries_at BEFORE INSERT ON deliveries
  WHEN NEW.at < '0' OR NEW.at IS NOT replace(datetime(NEW.at, '+0 days', 'subsec'), ' ', 'T') || 'Z'
    OR NEW.at <= (SELECT at FROM deliveries ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'timestamp'); END;
CREATE TRIGGER read_receipts_at BEFORE INSERT ON read_receipts
  WHEN NEW.at < '0' OR NEW.at IS NOT replace(datetime(NEW.at, '+0 days', 'subsec'), ' ', 'T') || 'Z'
    OR NEW.at <= (SELECT at FROM read_receipts ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'timestamp'); END;
CREATE TRIGGER task_snapshots_at BEFORE INSERT ON task_snapshots
  WHEN NEW.at < '0' OR NEW.at IS NOT replace(datetime(NEW.at, '+0 days', 'subsec'), ' ', 'T') || 'Z'
    OR NEW.read_at < '0' OR NEW.read_at IS NOT replace(datetime(NEW.read_at, '+0 days', 'subsec'), ' ', 'T') || 'Z'
    OR NEW.at <= (SELECT at FROM task_snapshots ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'timestamp'); END;
CREATE TRIGGER role_claims_one_holder BEFORE INSERT ON role_claims
  WHEN NEW.op = 'claim' AND (SELECT op FROM role_claims
    WHERE business = NEW.business AND role = NEW.role ORDER BY seq DESC LIMIT 1) = 'claim'
  BEGIN SELECT RAISE(ABORT, 'role-held'); END;
CREATE TRIGGER role_claims_release_by_holder BEFORE INSERT ON role_claims
  WHEN NEW.op = 'release' AND NOT EXISTS (SELECT 1 FROM (SELECT op, run FROM role_claims
    WHERE business = NEW.business AND role = NEW.role ORDER BY seq DESC LIMIT 1)
    WHERE op = 'claim' AND run = NEW.run)
  BEGIN SELECT RAISE(ABORT, 'not-holder'); END;
CREATE TRIGGER role_claims_revoked_run BEFORE INSERT ON role_claims
  WHEN NEW.op = 'claim' AND EXISTS (SELECT 1 FROM role_claims
    WHERE run = NEW.run AND business = NEW.business AND role = NEW.role AND op = 'revoke')
  BEGIN SELECT RAISE(ABORT, 'run-revoked'); END;
CREATE TRIGGER messages_same_business BEFORE INSERT ON messages
  WHEN (NEW.in_reply_to IS NOT NULL AND NOT EXISTS (SELECT 1 FROM messages
        WHERE id = NEW.in_reply_to AND business = NEW.business))
    OR (NEW.corrects IS NOT NULL AND NOT EXISTS (SELECT 1 FROM messages
        WHERE id = NEW.corrects AND business = NEW.business))
    OR (NEW.decision IS NOT NULL AND NOT EXISTS (SELECT 1 FROM decisions
        WHERE id = NEW.decision AND business = NEW.business))
    OR (NEW.request IS NOT NULL AND NOT EXISTS (SELECT 1 FROM events
        WHERE id = NEW.request AND business = NEW.business AND kind = 'human.input'
          AND (kind <> 'action.allowed' OR body < '{"action":"message.send",' OR body >= '{"action":"message.send"-')))
  BEGIN SELECT RAISE(ABORT, 'cross-business'); END;
CREATE TRIGGER read_receipts_by_recipient BEFORE INSERT ON read_receipts
  WHEN NOT EXISTS (SELECT 1 FROM deliveries WHERE message = NEW.message AND run = NEW.run)
  BEGIN SELECT RAISE(ABORT, 'not-delivered'); END;
CREATE TRIGGER events_task_subject BEFORE INSERT ON events
  WHEN json_extract(NEW.body, '$.task_ref') IS NOT NULL
    AND NEW.subject IS NOT json_extract(NEW.body, '$.task_ref')
  BEGIN SELECT RAISE(ABORT, 'task-subject'); END;
CREATE TRIGGER decision_events_same_business BEFORE INSERT ON decision_events
  WHEN NEW.input IS NOT NULL AND NOT EXISTS (SELECT 1 FROM events e JOIN decisions d
    ON d.id = NEW.decision WHERE e.id = NEW.input AND e.business = d.business
    AND e.kind = 'human.input' AND (kind <> 'action.allowed' OR body < '{"action":"message.send",' OR body >= '{"action":"message.send"-'))
  BEGIN SELECT RAISE(ABORT, 'cross-business'); END;
CREATE TRIGGER task_comment_cursors_no_update BEFORE UPDATE ON task_comment_cursors BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER task_comment_cursors_no_delete BEFORE DELETE ON task_comment_cursors BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER task_comment_cursors_no_replace BEFORE INSERT ON task_comment_cursors
  WHEN EXISTS (SELECT 1 FROM task_comment_cursors WHERE seq = NEW.seq)
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER task_comment_cursors_increase BEFORE INSERT ON task_comment_cursors
  WHEN NEW.last_comment <= (SELECT last_comment FROM task_comment_cursors
    WHERE business = NEW.business AND task_id = NEW.task_id ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'cursor-not-increasing'); END;
CREATE TRIGGER role_revoke_needs_decision BEFORE INSERT ON role_claims
  WHEN NEW.op = 'revoke' AND NEW.reason IS NULL AND NOT EXISTS (SELECT 1 FROM decision_events
    WHERE decision = NEW.decision AND kind = 'resolved')
  BEGIN SELECT RAISE(ABORT, 'revoke-needs-decision'); END;
CREATE TRIGGER projects_one_name BEFORE INSERT ON projects
  WHEN EXISTS (SELECT 1 FROM projects WHERE business = NEW.business AND name = NEW.name)
  BEGIN SELECT RAISE(ABORT, 'project-exists'); END;
CREATE TRIGGER threads_one_name BEFORE INSERT ON threads
  WHEN EXISTS (SELECT 1 FROM threads WHERE project = NEW.project AND name = NEW.name)
  BEGIN SELECT RAISE(ABORT, 'thread-exists'); END;
CREATE TRIGGER threads_same_business BEFORE INSERT ON threads
  WHEN NOT EXISTS (SELECT 1 FROM projects WHERE id = NEW.project AND business = NEW.business)
  BEGIN SELECT RAISE(ABORT, 'cross-business'); END;
CREATE TRIGGER thread_claims_same_business BEFORE INSERT ON thread_claims
  WHEN NOT EXISTS (SELECT 1 FROM threads WHERE id = NEW.thread AND business = NEW.business)
  BEGIN SELECT RAISE(ABORT, 'cross-business'); END;
CREATE TRIGGER thread_one_holder BEFORE INSERT ON thread_claims
  WHEN NEW.op = 'claim' AND (SELECT op FROM thread_claims
    WHERE thread = NEW.thread ORDER BY seq DESC LIMIT 1) = 'claim'
  BEGIN SELECT RAISE(ABORT, 'thread-already-held'); END;
CREATE TRIGGER thread_one_per_run BEFORE INSERT ON thread_claims
  WHEN NEW.op = 'claim' AND EXISTS (SELECT 1 FROM thread_claims
    WHERE run = NEW.run AND thread IS NOT NEW.thread)
  BEGIN SELECT RAISE(ABORT, 'thread-not-allowed'); END;
CREATE TRIGGER thread_release_by_holder BEFORE INSERT ON thread_claims
  WHEN NEW.op IN ('release', 'revoke') AND NOT EXISTS (SELECT 1 FROM (SELECT op, run
    FROM thread_claims WHERE thread = NEW.thread ORDER BY seq DESC LIMIT 1)
    WHERE op = 'claim' AND run = NEW.run)
  BEGIN SELECT RAISE(ABORT, 'not-holder'); END;
CREATE TRIGGER thread_revoked_run BEFORE INSERT ON thread_claims
  WHEN NEW.op = 'claim' AND EXISTS (SELECT 1 FROM thread_claims
    WHERE run = NEW.run AND thread = NEW.thread AND op = 'revoke')
  BEGIN SELECT RAISE(ABORT, 'run-revoked'); END;
CREATE TRIGGER thread_revoke_needs_decision BEFORE INSERT ON thread_claims
  WHEN NEW.op = 'revoke' AND NEW.reason IS NULL AND NOT EXISTS (SELECT 1 FROM decision_events
    WHERE decision = NEW.decision AND kind = 'resolved')
  BEGIN SELECT RAISE(ABORT, 'revoke-needs-decision'); END;
CREATE TRIGGER message_threads_match BEFORE INSERT ON message_threads
  WHEN NOT EXISTS (SELECT 1 FROM messages m JOIN threads t ON t.id = NEW.thread
    WHERE m.id = NEW.message AND m.business = t.business
      AND (m.from_role = t.instance OR m.to_role = t.instance))
  BEGIN SELECT RAISE(ABORT, 'thread-mismatch'); END;
CREATE TRIGGER delivery_same_thread BEFORE INSERT ON deliveries
  WHEN EXISTS (SELECT 1 FROM message_threads mt
      JOIN threads t ON t.id = mt.thread
      JOIN messages m ON m.id = mt.message
    WHERE mt.message = NEW.message AND m.to_role = t.instance
      AND NOT EXISTS (SELECT 1 FROM (SELECT op, run FROM thread_claims
        WHERE thread = mt.thread ORDER BY seq DESC LIMIT 1)
        WHERE op = 'claim' AND run = NEW.run))
  BEGIN SELECT RAISE(ABORT, 'not-holder'); END;
CREATE TRIGGER projects_no_update BEFORE UPDATE ON projects BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER projects_no_delete BEFORE DELETE ON projects BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER projects_no_replace BEFORE INSERT ON projects
  WHEN EXISTS (SELECT 1 FROM projects WHERE seq = NEW.seq OR id = NEW.id)
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER threads_no_update BEFORE UPDATE ON threads BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER threads_no_delete BEFORE DELETE ON threads BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER threads_no_replace BEFORE INSERT ON threads
  WHEN EXISTS (SELECT 1 FROM threads WHERE seq = NEW.seq OR id = NEW.id)
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER thread_claims_no_update BEFORE UPDATE ON thread_claims BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER thread_claims_no_delete BEFORE DELETE ON thread_claims BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER thread_claims_no_replace BEFORE INSERT ON thread_claims
  WHEN EXISTS (SELECT 1 FROM thread_claims WHERE seq = NEW.seq)
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER message_threads_no_update BEFORE UPDATE ON message_threads BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER message_threads_no_delete BEFORE DELETE ON message_threads BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER message_threads_no_replace BEFORE INSERT ON message_threads
  WHEN EXISTS (SELECT 1 FROM message_threads WHERE seq = NEW.seq OR message = NEW.message)
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER thread_opens_no_update BEFORE UPDATE ON thread_opens BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER thread_opens_no_delete BEFORE DELETE ON thread_opens BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER thread_opens_no_replace BEFORE INSERT ON thread_opens
  WHEN EXISTS (SELECT 1 FROM thread_opens WHERE seq = NEW.seq)
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER projects_at BEFORE INSERT ON projects
  WHEN NEW.at < '0' OR NEW.at IS NOT replace(datetime(NEW.at, '+0 days', 'subsec'), ' ', 'T') || 'Z'
    OR NEW.at <= (SELECT at FROM projects ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'timestamp'); END;
CREATE TRIGGER threads_at BEFORE INSERT ON threads
  WHEN NEW.at < '0' OR NEW.at IS NOT replace(datetime(NEW.at, '+0 days', 'subsec'), ' ', 'T') || 'Z'
    OR NEW.at <= (SELECT at FROM threads ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'timestamp'); END;
CREATE TRIGGER thread_claims_at BEFORE INSERT ON thread_claims
  WHEN NEW.at < '0' OR NEW.at IS NOT replace(datetime(NEW.at, '+0 days', 'subsec'), ' ', 'T') || 'Z'
    OR NEW.at <= (SELECT at FROM thread_claims ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'timestamp'); END;
CREATE TRIGGER message_threads_at BEFORE INSERT ON message_threads
  WHEN NEW.at < '0' OR NEW.at IS NOT replace(datetime(NEW.at, '+0 days', 'subsec'), ' ', 'T') || 'Z'
    OR NEW.at <= (SELECT at FROM message_threads ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'timestamp'); END;
CREATE TRIGGER thread_opens_at BEFORE INSERT ON thread_opens
  WHEN NEW.at < '0' OR NEW.at IS NOT replace(datetime(NEW.at, '+0 days', 'subsec'), ' ', 'T') || 'Z'
    OR NEW.at <= (SELECT at FROM thread_opens ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'timestamp'); END;
CREATE TRIGGER decisions_spec_citation BEFORE INSERT ON decisions
  WHEN (NEW.spec_path IS NULL) <> (NEW.spec_commit IS NULL)
    OR (NEW.spec_path IS NOT NULL AND NEW.project IS NULL)
  BEGIN SELECT RAISE(ABORT, 'invalid-spec-citation'); END;
CREATE TRIGGER instance_names_taken BEFORE INSERT ON instance_names
  WHEN EXISTS (SELECT 1 FROM instance_names n
    WHERE n.business = NEW.business AND n.name = NEW.name AND n.instance <> NEW.instance
      AND n.seq = (SELECT max(seq) FROM instance_names
        WHERE business = n.business AND instance = n.instance))
  BEGIN SELECT RAISE(ABORT, 'name-taken'); END;
CREATE TRIGGER messages_class BEFORE INSERT ON messages
  WHEN NOT (NEW.class = 'REQUEST' OR NEW.class = 'ASSIGNMENT'
    OR NEW.class = 'REVIEW-REQUEST' OR NEW.class = 'REVIEW-RESULT' OR NEW.class = 'RESULT'
    OR NEW.class = 'INFO' OR NEW.class = 'DECISION' OR NEW.class = 'REACTION'
    OR NEW.class = 'BLOCK' OR NEW.class = 'STAFF-REQUEST')
  BEGIN SELECT RAISE(ABORT, 'invalid-class'); END;
CREATE TRIGGER instance_names_no_update BEFORE UPDATE ON instance_names BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER instance_names_no_delete BEFORE DELETE ON instance_names BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER instance_names_no_replace BEFORE INSERT ON instance_names
  WHEN EXISTS (SELECT 1 FROM instance_names WHERE seq = NEW.seq)
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER instance_names_at BEFORE INSERT ON instance_names
  WHEN NEW.at < '0' OR NEW.at IS NOT replace(datetime(NEW.at, '+0 days', 'subsec'), ' ', 'T') || 'Z'
    OR NEW.at <= (SELECT at FROM instance_names ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'timestamp'); END;
CREATE TRIGGER usage_records_no_update BEFORE UPDATE ON usage_records BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER usage_records_no_delete BEFORE DELETE ON usage_records BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER usage_records_no_replace BEFORE INSERT ON usage_records
  WHEN EXISTS (SELECT 1 FROM usage_records WHERE seq = NEW.seq)
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE VIEW task_current AS
  SELECT s.* FROM task_snapshots s
  WHERE s.seq = (SELECT max(seq) FROM task_snapshots t
                 WHERE t.business = s.business AND t.task_ref = s.task_ref);
CREATE VIEW role_current AS
  SELECT c.* FROM role_claims c
  WHERE c.seq = (SELECT max(seq) FROM role_claims d
                 WHERE d.business = c.business AND d.role = c.role);
CREATE VIEW role_holders AS
  SELECT business, role, run, at AS since FROM role_current WHERE op = 'claim';
CREATE VIEW decision_state AS
  SELECT d.*,
    (SELECT kind FROM decision_events e WHERE e.decision = d.id
       AND e.kind IN ('resolved', 'withdrawn')) AS closed_kind,
    (SELECT choice FROM decision_events e WHERE e.decision = d.id
       AND e.kind = 'resolved') AS choice,
    EXISTS (SELECT 1 FROM decision_events e WHERE e.decision = d.id
       AND e.kind = 'consumed') AS consumed
  FROM decisions d;
CREATE VIEW message_state AS
  SELECT m.*, dl.run AS delivered_to, dl.at AS delivered_at,
    rr.at AS read_at
  FROM messages m
  LEFT JOIN deliveries dl ON dl.message = m.id
  LEFT JOIN read_receipts rr ON rr.message = m.id;
