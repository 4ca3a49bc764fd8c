package workflows_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"gitfleet/internal/devstack/repogen"
	"gitfleet/internal/devstack/testenv"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
)

// testFindingKey is the key the tests' scanners hash with: the worker's,
// given as production workers are given theirs.
var testFindingKey = testenv.FindingKey

// After a scan that found and hashed a secret, a dump of the database —
// every table's contents — holds no trace of the key that hashed it: not
// the key, not its hex (a bytea's text), not its base64 (the key file),
// and no settings row of the kind earlier releases kept it in. The scope
// records the version of the key its hashes are made with.
func TestDatabaseDumpHoldsNoFindingKey(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "repo.git")
	if _, err := repogen.Generate(dir, repogen.Spec{Commits: 3, FilesPerCommit: 2, BlobSize: 200, Seed: 11,
		Secrets: []repogen.Secret{{Commit: 1, Path: "deploy/ci.env", Content: "GITHUB_TOKEN=" + ghToken + "\n"}}}); err != nil {
		t.Fatal(err)
	}
	tg := normalized(t, target.Request{Location: dir})[0]
	if res := runScan(t, tg, 0); res.Status != shard.Done {
		t.Fatalf("scan: %+v", res)
	}
	fs := findings(t, tg.Key())
	if len(fs) == 0 || fs[0].SecretHash == "" {
		t.Fatalf("no hashed finding: %+v", fs)
	}

	secret := testFindingKey.Secret
	traces := map[string]string{
		"the key":           string(secret),
		"its hex":           hex.EncodeToString(secret),
		"its base64":        base64.StdEncoding.EncodeToString(secret),
		"its base64 (URL)":  base64.RawURLEncoding.EncodeToString(secret),
		"the key file text": testFindingKey.Format(),
	}
	db := env.Store.Pool()
	rows, err := db.Query(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	dumped := 0
	for _, table := range tables {
		rows, err := db.Query(ctx, `SELECT t::text FROM `+pgx.Identifier{table}.Sanitize()+` t`)
		if err != nil {
			t.Fatal(err)
		}
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range texts {
			dumped++
			for what, trace := range traces {
				if strings.Contains(text, trace) {
					t.Errorf("table %s holds %s: %.120s", table, what, text)
				}
			}
		}
	}
	if dumped == 0 || !strings.Contains(strings.Join(tables, " "), "findings") {
		t.Fatalf("dumped %d rows of %v", dumped, tables)
	}
	var legacy int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM settings WHERE name = 'finding_hash_key'`).Scan(&legacy); err != nil || legacy != 0 {
		t.Errorf("a finding key in settings: %d, %v", legacy, err)
	}
	var version *int
	if err := db.QueryRow(ctx, `SELECT s.key_version FROM scan_scopes s JOIN shards h ON h.id = s.shard_id
		WHERE h.key = $1 ORDER BY s.id DESC LIMIT 1`, tg.Key()).Scan(&version); err != nil || version == nil || *version != testFindingKey.Version {
		t.Errorf("the scope's key version: %v, %v; want %d", version, err, testFindingKey.Version)
	}
}
