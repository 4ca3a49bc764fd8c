package store_test

import (
	"context"
	"strings"
	"testing"

	"gitfleet/internal/infra/store"
)

// What a user means by a name (FindCodebase) and the codebase a name
// belonged to (CodebaseByFormerName) are read through indexes, not by
// scanning codebases and collections: on 20,000 codebases with 60,000
// collections the planner, free to choose, picks the name indexes.
func TestNameLookupsUseTheirIndexes(t *testing.T) {
	ctx := context.Background()
	st := scratch(t, "m_names")
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `
		INSERT INTO codebases (host, external_repo_id, owner, name, stale_since)
			SELECT 'h' || (i % 20) || '.example.com', i::text, 'owner' || (i % 500), 'Repo' || i,
				CASE WHEN i % 10 = 0 THEN now() END
			FROM generate_series(1, 20000) AS i;
		INSERT INTO collections (key, codebase_id, host, owner, name, status, workflow_id, run_id, started_at)
			SELECT 'k' || i, 1 + i % 20000, 'h' || (i % 20) || '.example.com', 'owner' || (i % 500), 'Old' || i,
				'succeeded', 'w', 'r', now() - i * interval '1 minute'
			FROM generate_series(1, 60000) AS i;
		ANALYZE codebases;
		ANALYZE collections`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct{ name, query, index, table string }{
		{"FindCodebase", store.ByNameLiveFirst, "codebases_name", "codebases"},
		{"CodebaseByFormerName", store.ByFormerName, "collections_name", "collections"},
	} {
		rows, err := st.Pool().Query(ctx, "EXPLAIN "+q.query, "h7.example.com", "OWNER7", "repo4207")
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		p := strings.Join(plan, "\n")
		if !strings.Contains(p, q.index) || strings.Contains(p, "Seq Scan on "+q.table) {
			t.Errorf("%s does not read %s through %s:\n%s", q.name, q.table, q.index, p)
		}
	}
}
