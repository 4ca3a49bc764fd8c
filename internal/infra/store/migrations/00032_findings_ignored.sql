-- +goose Up
-- Catalog changes only: a column with a constant default is no rewrite.
--
-- Why a finding is suppressed by the repository's own suppressions, as
-- gitleaks honours them (architecture §8): 'gitleaks:allow' on the matched
-- line (written by the scan, from the blob's content), '.gitleaksignore'
-- when the file at a scanned tip names its fingerprint (set and cleared
-- at each finalize from the tips' files), '' when not suppressed. A
-- suppressed finding is kept, and counted.
ALTER TABLE findings ADD COLUMN IF NOT EXISTS ignored TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE findings DROP COLUMN IF EXISTS ignored;
