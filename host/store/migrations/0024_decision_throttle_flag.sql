-- Policies of `admission-policy@0.2.0` may also throttle (a rate limit or
-- a budget: 429) and flag (allowed, a soft threshold recorded).
ALTER TABLE admission_decisions DROP CONSTRAINT admission_decisions_decision_check;
ALTER TABLE admission_decisions ADD CONSTRAINT admission_decisions_decision_check
    CHECK (decision IN ('allow', 'deny', 'patch', 'error', 'throttle', 'flag'));
