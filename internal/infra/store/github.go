package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"gitfleet/internal/domain/ghaccount"
)

// User is a gitfleet user: a name and the GitHub account its token is.
type User struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"`
	APIURL    string    `json:"apiUrl"`
	Login     string    `json:"githubLogin"`
	GitHubID  int64     `json:"githubUserId"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// TokenRefusedAt is when GitHub refused the token (401: revoked,
	// expired), nil while it has not; refreshes do not try it again until
	// PutUser replaces it (architecture §6, "Refusals").
	TokenRefusedAt     *time.Time `json:"tokenRefusedAt,omitempty"`
	TokenRefusedReason string     `json:"tokenRefusedReason,omitempty"`
}

// TokenContext binds a user's sealed token to its row: a sealed token
// copied to another user's row does not open.
func TokenContext(userName string) string { return "user:" + userName }

// NewUser is a user to add, with the token already sealed.
type NewUser struct {
	Name, APIURL, Login string
	GitHubID            int64
	TokenSealed         []byte
}

const userColumns = `id, name, api_url, github_login, github_user_id, created_at, updated_at,
	token_refused_at, coalesce(token_refused_reason, '')`

func scanUser(row pgx.Row) (*User, error) {
	var u User
	err := row.Scan(&u.ID, &u.Name, &u.APIURL, &u.Login, &u.GitHubID, &u.CreatedAt, &u.UpdatedAt, &u.TokenRefusedAt, &u.TokenRefusedReason)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return &u, err
}

// PutUser adds a user, or replaces the token of the user with that name
// (which clears a refusal of the old one). When the token is now another
// GitHub account's, the cached view of the old account goes with it.
func (s *Store) PutUser(ctx context.Context, nu NewUser) (User, error) {
	var u *User
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		old, err := scanUser(tx.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE name = $1 FOR UPDATE`, nu.Name))
		if err != nil {
			return err
		}
		if old != nil && (old.GitHubID != nu.GitHubID || old.APIURL != nu.APIURL) {
			if err := dropView(ctx, tx, old.ID); err != nil {
				return err
			}
		}
		u, err = scanUser(tx.QueryRow(ctx, `INSERT INTO users (name, api_url, github_login, github_user_id, token_sealed)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (name) DO UPDATE SET api_url = excluded.api_url, github_login = excluded.github_login,
				github_user_id = excluded.github_user_id, token_sealed = excluded.token_sealed, updated_at = now(),
				token_refused_at = NULL, token_refused_reason = NULL
			RETURNING `+userColumns, nu.Name, nu.APIURL, nu.Login, nu.GitHubID, nu.TokenSealed))
		return err
	})
	if err != nil {
		return User{}, fmt.Errorf("save user %s: %w", nu.Name, err)
	}
	return *u, nil
}

// dropView deletes a user's cached view.
func dropView(ctx context.Context, tx pgx.Tx, userID int64) error {
	for _, table := range []string{"user_github_lists", "user_github_repositories", "user_github_org_memberships", "github_pages"} {
		if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE user_id = $1`, userID); err != nil {
			return err
		}
	}
	return nil
}

// Users lists the users by name.
func (s *Store) Users(ctx context.Context) ([]User, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+userColumns+` FROM users ORDER BY name`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (User, error) {
		u, err := scanUser(r)
		return *u, err
	})
}

// UserByName returns a user or nil.
func (s *Store) UserByName(ctx context.Context, name string) (*User, error) {
	return scanUser(s.pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE name = $1`, name))
}

// UserByID returns a user or nil.
func (s *Store) UserByID(ctx context.Context, id int64) (*User, error) {
	return scanUser(s.pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, id))
}

// SealedToken returns a user's sealed token.
func (s *Store) SealedToken(ctx context.Context, userID int64) ([]byte, error) {
	var sealed []byte
	err := s.pool.QueryRow(ctx, `SELECT token_sealed FROM users WHERE id = $1`, userID).Scan(&sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("user %d does not exist", userID)
	}
	return sealed, err
}

// RefuseToken records that GitHub refused a user's token (401), once: the
// first refusal's time stays. A token replaced since the refresh read it
// (another sealed token) is not marked. It returns the user as it is now
// (nil: removed).
func (s *Store) RefuseToken(ctx context.Context, userID int64, sealed []byte, reason string, at time.Time) (*User, error) {
	if _, err := s.pool.Exec(ctx, `UPDATE users SET token_refused_at = $4, token_refused_reason = $3
		WHERE id = $1 AND token_sealed = $2 AND token_refused_at IS NULL`, userID, sealed, reason, at); err != nil {
		return nil, fmt.Errorf("mark the token of user %d refused: %w", userID, err)
	}
	return s.UserByID(ctx, userID)
}

// RemoveUser deletes a user with its cached view; false when there was none.
func (s *Store) RemoveUser(ctx context.Context, name string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM users WHERE name = $1`, name)
	return tag.RowsAffected() == 1, err
}

// GitHubLists returns the lists a user's cache holds and when each was
// refreshed (zero: asked for, never fetched).
func (s *Store) GitHubLists(ctx context.Context, userID int64) (map[string]time.Time, error) {
	rows, err := s.pool.Query(ctx, `SELECT list, coalesce(refreshed_at, 'epoch') FROM user_github_lists WHERE user_id = $1`, userID)
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	var list string
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&list, &at}, func() error {
		if at.Unix() != 0 {
			out[list] = at
		} else {
			out[list] = time.Time{}
		}
		return nil
	})
	return out, err
}

// ListRefusal says why GitHub refused a user's list at its last refresh
// ("": it did not).
func (s *Store) ListRefusal(ctx context.Context, userID int64, list string) (string, error) {
	var why string
	err := s.pool.QueryRow(ctx, `SELECT coalesce(refused_reason, '') FROM user_github_lists WHERE user_id = $1 AND list = $2`,
		userID, list).Scan(&why)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return why, err
}

// ForgetList drops a list of a user's cache (an organization's view by
// name), the repositories only it held and its pages (their URLs start
// with pages).
func (s *Store) ForgetList(ctx context.Context, userID int64, list, pages string) (bool, error) {
	org := ghaccount.OrgOfList(list)
	var found bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM user_github_lists WHERE user_id = $1 AND list = $2`, userID, list)
		if err != nil {
			return err
		}
		found = tag.RowsAffected() > 0
		if _, err := tx.Exec(ctx, `DELETE FROM user_github_repositories WHERE user_id = $1 AND by_name AND lower(owner) = lower($2)`,
			userID, org); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM github_pages WHERE user_id = $1 AND starts_with(url, $2)`, userID, pages)
		return err
	})
	return found, err
}

// AskList adds lists to a user's cache, unfetched; lists already there stay
// as they are.
func (s *Store) AskList(ctx context.Context, userID int64, lists ...string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO user_github_lists (user_id, list) SELECT $1, unnest($2::text[])
		ON CONFLICT DO NOTHING`, userID, lists)
	return err
}

// GitHubPages returns the stored pages of a user's lists by URL.
func (s *Store) GitHubPages(ctx context.Context, userID int64) (map[string]ghaccount.Page, error) {
	rows, err := s.pool.Query(ctx, `SELECT url, etag, last_modified, next_url, body, fetched_at FROM github_pages WHERE user_id = $1`, userID)
	if err != nil {
		return nil, err
	}
	out := map[string]ghaccount.Page{}
	var p ghaccount.Page
	_, err = pgx.ForEachRow(rows, []any{&p.URL, &p.ETag, &p.LastModified, &p.Next, &p.Body, &p.FetchedAt}, func() error {
		out[p.URL] = p
		return nil
	})
	return out, err
}

// SaveGitHubPage stores one page of a user's list as a refresh fetches
// it, before the view is replaced: a retried refresh finds it.
func (s *Store) SaveGitHubPage(ctx context.Context, userID int64, p ghaccount.Page) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO github_pages (user_id, url, etag, last_modified, next_url, body, fetched_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (user_id, url) DO UPDATE SET etag = excluded.etag, last_modified = excluded.last_modified,
			next_url = excluded.next_url, body = excluded.body, fetched_at = excluded.fetched_at`,
		userID, p.URL, p.ETag, p.LastModified, p.Next, p.Body, p.FetchedAt)
	return err
}

// ReplaceGitHubView replaces a user's cached view with a refresh's, in one
// transaction: the organizations (global rows, updated in place), the
// user's memberships, repositories, lists and pages. What the refresh did
// not see is gone, and so are the lists it found missing or joined; a
// list asked for while it ran stays asked, and a refused one keeps its
// rows (the refresh carries its stored pages) and its last refresh time.
func (s *Store) ReplaceGitHubView(ctx context.Context, userID int64, apiURL string, v ghaccount.View, now time.Time) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		orgs := map[int64]ghaccount.Org{}
		for _, r := range v.Repos {
			if r.Source == ghaccount.Organization {
				orgs[r.OwnerID] = ghaccount.Org{ID: r.OwnerID, Login: r.Owner}
			}
		}
		for _, o := range v.Orgs {
			orgs[o.ID] = o
		}
		ids, logins, descs := make([]int64, 0, len(orgs)), make([]string, 0, len(orgs)), make([]string, 0, len(orgs))
		for _, o := range orgs {
			ids, logins, descs = append(ids, o.ID), append(logins, o.Login), append(descs, o.Description)
		}
		// Repositories carry no description: keep the one a membership saw.
		if _, err := tx.Exec(ctx, `INSERT INTO github_organizations (api_url, github_org_id, login, description, updated_at)
			SELECT $1, i, l, d, $5 FROM unnest($2::bigint[], $3::text[], $4::text[]) AS t(i, l, d)
			ON CONFLICT (api_url, github_org_id) DO UPDATE SET login = excluded.login,
				description = CASE WHEN excluded.description = '' THEN github_organizations.description ELSE excluded.description END,
				updated_at = excluded.updated_at`, apiURL, ids, logins, descs, now); err != nil {
			return err
		}
		// Lists asked for while the refresh ran (it did not fetch them, nor
		// find them missing) stay asked, for the next refresh.
		done := slices.Concat(v.Lists, v.Missing, v.Joined)
		refused := make([]string, len(v.Refused))
		reasons := make([]string, len(v.Refused))
		for i, r := range v.Refused {
			refused[i], reasons[i] = r.List, r.Reason
			done = append(done, r.List)
		}
		rows, err := tx.Query(ctx, `SELECT list FROM user_github_lists
			WHERE user_id = $1 AND refreshed_at IS NULL AND NOT list = ANY($2::text[])`, userID, done)
		if err != nil {
			return err
		}
		asked, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		// A refused list keeps when it was last fetched, and says why not now.
		rows, err = tx.Query(ctx, `SELECT t.list, l.refreshed_at, t.reason
			FROM unnest($2::text[], $3::text[]) AS t(list, reason)
			LEFT JOIN user_github_lists l ON l.user_id = $1 AND l.list = t.list`, userID, refused, reasons)
		if err != nil {
			return err
		}
		type refusal struct {
			List      string
			Refreshed *time.Time
			Reason    string
		}
		kept, err := pgx.CollectRows(rows, pgx.RowToStructByPos[refusal])
		if err != nil {
			return err
		}
		if err := dropView(ctx, tx, userID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO user_github_lists (user_id, list) SELECT $1, unnest($2::text[])`, userID, asked); err != nil {
			return err
		}
		for _, r := range kept {
			if _, err := tx.Exec(ctx, `INSERT INTO user_github_lists (user_id, list, refreshed_at, refused_at, refused_reason)
				VALUES ($1, $2, $3, $4, $5)`, userID, r.List, r.Refreshed, now, r.Reason); err != nil {
				return err
			}
		}
		member := make([]int64, len(v.Orgs))
		for i, o := range v.Orgs {
			member[i] = o.ID
		}
		if _, err := tx.Exec(ctx, `INSERT INTO user_github_org_memberships (user_id, org_id)
			SELECT $1, o.id FROM github_organizations o WHERE o.api_url = $2 AND o.github_org_id = ANY($3::bigint[])`,
			userID, apiURL, member); err != nil {
			return err
		}
		n := len(v.Repos)
		rid, oid := make([]int64, n), make([]int64, n)
		owner, name, source, vis, branch := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		archived, fork, byName := make([]bool, n), make([]bool, n), make([]bool, n)
		pushed := make([]*time.Time, n)
		for i, r := range v.Repos {
			rid[i], oid[i], owner[i], name[i], source[i], vis[i], branch[i] = r.ID, r.OwnerID, r.Owner, r.Name, string(r.Source), r.Visibility, r.DefaultBranch
			archived[i], fork[i], byName[i] = r.Archived, r.Fork, r.ByName
			if !r.PushedAt.IsZero() {
				pushed[i] = &v.Repos[i].PushedAt
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO user_github_repositories (user_id, github_repo_id, owner, name, source_type,
				org_id, visibility, default_branch, archived, fork, pushed_at, by_name)
			SELECT $1, t.rid, t.owner, t.name, t.source,
				(SELECT o.id FROM github_organizations o WHERE o.api_url = $2 AND o.github_org_id = t.oid AND t.source = 'organization'),
				t.vis, t.branch, t.archived, t.fork, t.pushed, t.by_name
			FROM unnest($3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::bool[],
				$11::bool[], $12::timestamptz[], $13::bool[]) AS t(rid, oid, owner, name, source, vis, branch, archived, fork, pushed, by_name)`,
			userID, apiURL, rid, oid, owner, name, source, vis, branch, archived, fork, pushed, byName); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO user_github_lists (user_id, list, refreshed_at) SELECT $1, unnest($2::text[]), $3`,
			userID, v.Lists, now); err != nil {
			return err
		}
		for _, p := range v.Pages {
			at := p.FetchedAt
			if at.IsZero() {
				at = now
			}
			if _, err := tx.Exec(ctx, `INSERT INTO github_pages (user_id, url, etag, last_modified, next_url, body, fetched_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7)`, userID, p.URL, p.ETag, p.LastModified, p.Next, p.Body, at); err != nil {
				return err
			}
		}
		return nil
	})
}

// CachedRepos returns a user's cached repositories that pass the filter
// (without an organization: the user's own list, see ghaccount.Filter),
// sorted by full name (case-insensitively), those after the full name
// after, at most limit of them (0: all).
func (s *Store) CachedRepos(ctx context.Context, userID int64, f ghaccount.Filter, after string, limit int) ([]ghaccount.Repo, error) {
	rows, err := s.pool.Query(ctx, `SELECT github_repo_id, owner, name, coalesce(o.github_org_id, 0), source_type, visibility,
			default_branch, archived, fork, coalesce(pushed_at, 'epoch'), by_name
		FROM user_github_repositories r LEFT JOIN github_organizations o ON o.id = r.org_id
		WHERE r.user_id = $1 AND ($2 = '' AND NOT r.by_name OR lower(r.owner) = lower($2)) AND ($3 OR NOT r.archived)
			AND lower(r.owner || '/' || r.name) > lower($4)
		ORDER BY lower(r.owner || '/' || r.name), r.github_repo_id
		LIMIT nullif($5, 0)`, userID, f.Org, f.IncludeArchived, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ghaccount.Repo, error) {
		var r ghaccount.Repo
		var source string
		err := row.Scan(&r.ID, &r.Owner, &r.Name, &r.OwnerID, &source, &r.Visibility, &r.DefaultBranch, &r.Archived, &r.Fork, &r.PushedAt, &r.ByName)
		r.Source = ghaccount.SourceType(source)
		if r.PushedAt.Unix() == 0 {
			r.PushedAt = time.Time{}
		}
		return r, err
	})
}

// CachedOrgs returns the organizations a user is a member of, by login.
func (s *Store) CachedOrgs(ctx context.Context, userID int64) ([]ghaccount.Org, error) {
	rows, err := s.pool.Query(ctx, `SELECT o.github_org_id, o.login, o.description
		FROM user_github_org_memberships m JOIN github_organizations o ON o.id = m.org_id
		WHERE m.user_id = $1 ORDER BY lower(o.login)`, userID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[ghaccount.Org])
}
