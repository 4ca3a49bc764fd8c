-- What GitHub refused in a user's cache (architecture §6, "Refusals"): an
-- organization asked for by name that answers 403 (SAML single sign-on
-- enforced, an IP allow list) keeps its last good rows and says why,
-- instead of failing the user's whole refresh; a token GitHub no longer
-- accepts (401) is marked on the user, shown by `starter users list`, and
-- not tried again until it is replaced.
-- Nullable columns without a default: no rewrite, nothing to do online.

-- +goose Up
SET lock_timeout = '5s';
ALTER TABLE user_github_lists ADD COLUMN IF NOT EXISTS refused_at TIMESTAMPTZ,
    ADD COLUMN IF NOT EXISTS refused_reason TEXT;
ALTER TABLE users ADD COLUMN IF NOT EXISTS token_refused_at TIMESTAMPTZ,
    ADD COLUMN IF NOT EXISTS token_refused_reason TEXT;
RESET lock_timeout;

-- +goose Down
ALTER TABLE users DROP COLUMN IF EXISTS token_refused_reason, DROP COLUMN IF EXISTS token_refused_at;
ALTER TABLE user_github_lists DROP COLUMN IF EXISTS refused_reason, DROP COLUMN IF EXISTS refused_at;
