
-- Step 3b -> 3c: task comment cursors. Append-only (business, task_id,
-- last_comment) rows written by the trusted task sync beside the comment
-- event they stand for; the latest row per task wins, and the store refuses
-- a cursor that does not move forward. The step also records the immutable
-- comment_cursor_epoch in meta.
CREATE TABLE task_comment_cursors (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  business TEXT NOT NULL,
  task_id INTEGER NOT NULL CHECK (typeof(task_id) = 'integer' AND task_id > 0),
  last_comment INTEGER NOT NULL CHECK (typeof(last_comment) = 'integer' AND last_comment > 0)
);
CREATE INDEX task_comment_cursors_task ON task_comment_cursors(business, task_id, seq);
CREATE TRIGGER task_comment_cursors_no_update BEFORE UPDATE ON task_comment_cursors BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER task_comment_cursors_no_delete BEFORE DELETE ON task_comment_cursors BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER task_comment_cursors_no_replace BEFORE INSERT ON task_comment_cursors
  WHEN EXISTS (SELECT 1 FROM task_comment_cursors WHERE seq = NEW.seq)
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER task_comment_cursors_increase BEFORE INSERT ON task_comment_cursors
  WHEN NEW.last_comment <= (SELECT last_comment FROM task_comment_cursors
    WHERE business = NEW.business AND task_id = NEW.task_id ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'cursor-not-increasing'); END;
