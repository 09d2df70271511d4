
-- Step 3e -> 3f: a decision may cite the project's north-star spec (3i row
-- 138). Two nullable columns; every decision raised before 3f keeps nulls
-- (it cited nothing). No event, resolution or other row changes, and no
-- spec or confirmation table: the spec itself lives in the project's Git
-- repository. A citation names both the path and the full commit, and only
-- on a decision that names its project.
ALTER TABLE decisions ADD COLUMN spec_path TEXT
  CHECK (spec_path IS NULL OR spec_path = 'spec/north-star.md');
ALTER TABLE decisions ADD COLUMN spec_commit TEXT
  CHECK (spec_commit IS NULL OR (length(spec_commit) = 40
    AND spec_commit NOT GLOB '*[^0-9a-f]*'));
CREATE TRIGGER decisions_spec_citation BEFORE INSERT ON decisions
  WHEN (NEW.spec_path IS NULL) <> (NEW.spec_commit IS NULL)
    OR (NEW.spec_path IS NOT NULL AND NEW.project IS NULL)
  BEGIN SELECT RAISE(ABORT, 'invalid-spec-citation'); END;
