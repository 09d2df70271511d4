
-- Step 3f -> 3g: names for instances (3i row 141, REQ-MSG-2) and the staff
-- request's class (row 140). An append-only table of names: naming an
-- instance again adds a row, and an instance's name is its latest row. A
-- nullable messages.to_name, null on every existing message (they were all
-- sent by instance). The class guard is replaced with one that also admits
-- BLOCK (row 143, a pm's or cto's answer to a spec review notice) and
-- STAFF-REQUEST, which only staff.request writes. No row changes.
CREATE TABLE instance_names (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  business TEXT NOT NULL,
  instance TEXT NOT NULL CHECK (length(instance) BETWEEN 1 AND 64),
  name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
  by_role TEXT NOT NULL,
  by_run TEXT NOT NULL,
  at TEXT NOT NULL
);
CREATE INDEX instance_names_name ON instance_names(business, name, seq);
CREATE INDEX instance_names_instance ON instance_names(business, instance, seq);
CREATE TRIGGER instance_names_taken BEFORE INSERT ON instance_names
  WHEN EXISTS (SELECT 1 FROM instance_names n
    WHERE n.business = NEW.business AND n.name = NEW.name AND n.instance <> NEW.instance
      AND n.seq = (SELECT max(seq) FROM instance_names
        WHERE business = n.business AND instance = n.instance))
  BEGIN SELECT RAISE(ABORT, 'name-taken'); END;
ALTER TABLE messages ADD COLUMN to_name TEXT
  CHECK (to_name IS NULL OR length(to_name) BETWEEN 1 AND 64);
DROP TRIGGER messages_class;
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
  WHEN NEW.at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.at)
    OR NEW.at <= (SELECT at FROM instance_names ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'timestamp'); END;
