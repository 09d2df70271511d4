
-- Step 3d -> 3e: projects and threads (3i row 121). A thread is one
-- conversation between the business's human and its thread instance; its
-- runs claim the thread, not the role. Five append-only tables; messages
-- keep their columns, and a message's thread is a message_threads row
-- written with it. No existing row changes: messages from before 3e have
-- no thread.
CREATE TABLE projects (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  business TEXT NOT NULL,
  name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  repo TEXT,
  by TEXT NOT NULL,
  at TEXT NOT NULL
);
CREATE INDEX projects_business ON projects(business, name);

CREATE TABLE threads (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  business TEXT NOT NULL,
  project TEXT NOT NULL REFERENCES projects(id),
  instance TEXT NOT NULL,
  user TEXT NOT NULL,
  name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  at TEXT NOT NULL
);
CREATE INDEX threads_project ON threads(project, name);
CREATE INDEX threads_user ON threads(business, user, seq);

-- Claim, release and revoke of a thread by a run of its instance.
CREATE TABLE thread_claims (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  business TEXT NOT NULL,
  thread TEXT NOT NULL REFERENCES threads(id),
  run TEXT NOT NULL,
  op TEXT NOT NULL CHECK (op IN ('claim', 'release', 'revoke')),
  decision TEXT REFERENCES decisions(id),
  reason TEXT CHECK (reason IS NULL OR length(reason) BETWEEN 1 AND 500),
  by TEXT,
  at TEXT NOT NULL
);
CREATE INDEX thread_claims_thread ON thread_claims(thread, seq);
CREATE INDEX thread_claims_run ON thread_claims(run, seq);

CREATE TABLE message_threads (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  message TEXT NOT NULL UNIQUE REFERENCES messages(id),
  thread TEXT NOT NULL REFERENCES threads(id),
  at TEXT NOT NULL
);
CREATE INDEX message_threads_thread ON message_threads(thread, seq);

-- The human asking the launcher to start a thread's session.
CREATE TABLE thread_opens (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  thread TEXT NOT NULL REFERENCES threads(id),
  by TEXT NOT NULL,
  at TEXT NOT NULL
);
CREATE INDEX thread_opens_thread ON thread_opens(thread, seq);

-- The rules the broker checks first; the store backs them up.
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

-- Append-only guards and timestamps, created last so that they fire first.
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
  WHEN NEW.at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.at)
    OR NEW.at <= (SELECT at FROM projects ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'timestamp'); END;
CREATE TRIGGER threads_at BEFORE INSERT ON threads
  WHEN NEW.at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.at)
    OR NEW.at <= (SELECT at FROM threads ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'timestamp'); END;
CREATE TRIGGER thread_claims_at BEFORE INSERT ON thread_claims
  WHEN NEW.at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.at)
    OR NEW.at <= (SELECT at FROM thread_claims ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'timestamp'); END;
CREATE TRIGGER message_threads_at BEFORE INSERT ON message_threads
  WHEN NEW.at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.at)
    OR NEW.at <= (SELECT at FROM message_threads ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'timestamp'); END;
CREATE TRIGGER thread_opens_at BEFORE INSERT ON thread_opens
  WHEN NEW.at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.at)
    OR NEW.at <= (SELECT at FROM thread_opens ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'timestamp'); END;
