-- +goose Up
-- Catalog change only (a constant default: no rewrite, no scan); the
-- lock_timeout makes the migration fail (and be run again) rather than
-- queue every query of the table behind a long transaction.
SET LOCAL lock_timeout = '5s';

-- A repository the user's cache holds only because an organization was
-- asked for by name (`starter github repos --org ORG` by a non-member):
-- shown in that organization's view, never in the user's own list, which
-- holds what /user/repos and the user's memberships give.
ALTER TABLE user_github_repositories ADD COLUMN by_name BOOLEAN NOT NULL DEFAULT false;

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE user_github_repositories DROP COLUMN by_name;
