
-- Step 3c -> 3d: a revoke needs a resolved decision or a reason. The reason
-- path is the role.end holder's (the chief of staff's); which roles may take
-- it is the broker's rule, the store only keeps a revoke from carrying
-- neither.
ALTER TABLE role_claims ADD COLUMN reason TEXT CHECK (reason IS NULL OR length(reason) BETWEEN 1 AND 500);
DROP TRIGGER role_revoke_needs_decision;
CREATE TRIGGER role_revoke_needs_decision BEFORE INSERT ON role_claims
  WHEN NEW.op = 'revoke' AND NEW.reason IS NULL AND NOT EXISTS (SELECT 1 FROM decision_events
    WHERE decision = NEW.decision AND kind = 'resolved')
  BEGIN SELECT RAISE(ABORT, 'revoke-needs-decision'); END;
