package store_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/store"
)

// occ is a finding of secret hash under rule in blob at offset start, met
// at path:line in commit.
func occ(rule, hash string, blob byte, start int, path string, line int, commit string) store.Finding {
	return store.Finding{RuleID: rule, SecretHash: hash, Blob: []byte{blob}, Start: start, End: start + 8, Line: line,
		Path: path, Commit: commit, Preview: "prev…" + hash}
}

// New findings count secrets: a rule and keyed hash the scope had no
// finding of, however many blob versions or offsets hold it.
func TestWriteDataCountsNewSecrets(t *testing.T) {
	ctx := context.Background()
	shardID := newShard(t)
	scope, _ := env.Store.Scope(ctx, shardID, "p")
	l := acquire(t, shardID, "owner", time.Minute)
	steps := []struct {
		name     string
		findings []store.Finding
		want     int64
	}{
		{"two secrets in one blob", []store.Finding{occ("r", "h1", 1, 0, "a", 1, "c1"), occ("r", "h2", 1, 40, "a", 2, "c1")}, 2},
		{"the same secret in two new versions", []store.Finding{occ("r", "h1", 2, 0, "a", 1, "c2"), occ("r", "h1", 3, 0, "a", 1, "c3")}, 0},
		{"the same hash under another rule", []store.Finding{occ("r2", "h1", 3, 0, "a", 1, "c3")}, 1},
		{"one secret twice in one blob, both new", []store.Finding{occ("r", "h3", 4, 0, "b", 1, "c4"), occ("r", "h3", 4, 50, "b", 3, "c4")}, 1},
		{"a new secret beside an old one", []store.Finding{occ("r", "h2", 5, 0, "c", 1, "c5"), occ("r", "h4", 5, 30, "c", 2, "c5")}, 1},
		{"a path-only rule: each file is a secret", []store.Finding{occ("pem", "", 7, 0, "x.pem", 0, "c7"), occ("pem", "", 8, 0, "y.pem", 0, "c7")}, 2},
		{"a new version of a matched file", []store.Finding{occ("pem", "", 9, 0, "x.pem", 0, "c8")}, 0},
		{"a replayed batch", []store.Finding{occ("r", "h1", 1, 0, "a", 1, "c1"), occ("r", "h2", 1, 40, "a", 2, "c1")}, 0},
		{"nothing", nil, 0},
	}
	for _, st := range steps {
		n, err := env.Store.WriteData(ctx, l, scope, store.DataOps{Findings: st.findings})
		if err != nil || n != st.want {
			t.Errorf("%s: %d new, %v; want %d", st.name, n, err, st.want)
		}
	}
	// Finalize counts its own batch the same way on top of the run's stats.
	r, err := env.Store.Finalize(ctx, store.FinalizeInput{Lease: l, ScopeID: scope, Complete: true,
		Data:  store.DataOps{Findings: []store.Finding{occ("r", "h4", 6, 0, "c", 2, "c6"), occ("r", "h5", 6, 9, "c", 3, "c6")}},
		Stats: shard.Counts{Findings: 5}})
	if err != nil || r.Findings != 6 {
		t.Fatalf("finalize: %d new findings, %v; want 5 + 1", r.Findings, err)
	}
	if p, err := env.Store.Secrets(ctx, scope, store.Page{}); err != nil || p.Total != 8 || p.TotalOccurrences != 14 {
		t.Fatalf("secrets: %d in %d occurrences, %v; want 8 in 14", p.Total, p.TotalOccurrences, err)
	}
	x, err := env.Store.Occurrences(ctx, scope, []store.SecretKey{{RuleID: "pem", File: "x.pem"}}, store.Page{})
	if err != nil || x.Total != 2 {
		t.Fatalf("occurrences of the path-only secret x.pem: %+v, %v", x, err)
	}
}

// Secrets group occurrences by rule and hash, first met first; pages are
// keyset pages with the scope's totals.
func TestSecretsAndOccurrencesPages(t *testing.T) {
	ctx := context.Background()
	shardID := newShard(t)
	scope, _ := env.Store.Scope(ctx, shardID, "p")
	l := acquire(t, shardID, "owner", time.Minute)
	batches := [][]store.Finding{
		{occ("gh", "s1", 1, 0, "test/a_test.go", 10, "c1"), occ("aws", "s2", 1, 90, "test/a_test.go", 12, "c1")},
		{occ("gh", "s1", 2, 0, "test/a_test.go", 11, "c2")},
		{occ("gh", "s1", 3, 0, "test/a_test.go", 12, "c3"), occ("gh", "s3", 4, 0, "cfg.env", 1, "c3")},
	}
	for _, b := range batches {
		if _, err := env.Store.WriteData(ctx, l, scope, store.DataOps{Findings: b}); err != nil {
			t.Fatal(err)
		}
	}

	all, err := env.Store.Secrets(ctx, scope, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if all.Total != 3 || all.TotalOccurrences != 5 || len(all.Secrets) != 3 {
		t.Fatalf("secrets: %+v", all)
	}
	want := []struct {
		rule, hash  string
		first, last store.Location
		count       int64
	}{
		{"gh", "s1", store.Location{Path: "test/a_test.go", Line: 10, Commit: "c1"}, store.Location{Path: "test/a_test.go", Line: 12, Commit: "c3"}, 3},
		{"aws", "s2", store.Location{Path: "test/a_test.go", Line: 12, Commit: "c1"}, store.Location{Path: "test/a_test.go", Line: 12, Commit: "c1"}, 1},
		{"gh", "s3", store.Location{Path: "cfg.env", Line: 1, Commit: "c3"}, store.Location{Path: "cfg.env", Line: 1, Commit: "c3"}, 1},
	}
	for i, w := range want {
		s := all.Secrets[i]
		if s.RuleID != w.rule || s.SecretHash != w.hash || s.Location != w.first || s.Last != w.last || s.Occurrences != w.count ||
			s.Preview != "prev…"+w.hash || s.Status != store.Unknown {
			t.Errorf("secret %d = %+v, want %+v", i, s, w)
		}
	}

	// Keyset pages: every secret once, in order, whatever the page size.
	for _, size := range []int{1, 2, 3, 10} {
		t.Run(fmt.Sprintf("pages of %d", size), func(t *testing.T) {
			var got []string
			after := int64(0)
			for range 10 {
				p, err := env.Store.Secrets(ctx, scope, store.Page{After: after, Limit: size})
				if err != nil || p.Total != 3 || len(p.Secrets) > size {
					t.Fatalf("page after %d: %+v, %v", after, p, err)
				}
				if len(p.Secrets) == 0 {
					break
				}
				for _, s := range p.Secrets {
					got = append(got, s.SecretHash)
				}
				after = p.Secrets[len(p.Secrets)-1].Cursor
			}
			if fmt.Sprint(got) != "[s1 s2 s3]" {
				t.Errorf("pages gave %v", got)
			}
		})
	}

	tests := []struct {
		name      string
		keys      []store.SecretKey
		page      store.Page
		total     int64
		wantLines []int
	}{
		{"all", nil, store.Page{}, 5, []int{10, 12, 11, 12, 1}},
		{"one secret", []store.SecretKey{{RuleID: "gh", SecretHash: "s1"}}, store.Page{}, 3, []int{10, 11, 12}},
		{"one secret, a page", []store.SecretKey{{RuleID: "gh", SecretHash: "s1"}}, store.Page{Limit: 2}, 3, []int{10, 11}},
		{"two secrets", []store.SecretKey{{RuleID: "gh", SecretHash: "s3"}, {RuleID: "aws", SecretHash: "s2"}}, store.Page{}, 2, []int{12, 1}},
		{"the hash under another rule", []store.SecretKey{{RuleID: "aws", SecretHash: "s1"}}, store.Page{}, 0, nil},
		{"no keys", []store.SecretKey{}, store.Page{}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := env.Store.Occurrences(ctx, scope, tt.keys, tt.page)
			if err != nil || p.Total != tt.total {
				t.Fatalf("occurrences: total %d, %v; want %d", p.Total, err, tt.total)
			}
			var lines []int
			for _, o := range p.Occurrences {
				lines = append(lines, o.Line)
			}
			if fmt.Sprint(lines) != fmt.Sprint(tt.wantLines) {
				t.Errorf("lines %v, want %v", lines, tt.wantLines)
			}
			if len(p.Occurrences) > 0 && tt.page.Limit > 0 {
				next, _ := env.Store.Occurrences(ctx, scope, tt.keys, store.Page{After: p.Occurrences[len(p.Occurrences)-1].Cursor})
				if int64(len(p.Occurrences)+len(next.Occurrences)) != tt.total {
					t.Errorf("the next page holds %d, want the rest of %d", len(next.Occurrences), tt.total)
				}
			}
		})
	}
}

// Presence: a secret is present while a blob holding it is in a tip's tree
// at the latest Complete scan, removed when none is, unknown when found
// since.
func TestSecretPresence(t *testing.T) {
	ctx := context.Background()
	shardID := newShard(t)
	scope, _ := env.Store.Scope(ctx, shardID, "p")
	l := acquire(t, shardID, "owner", time.Minute)
	// s1 in blobs 1, 2, 3 (a file edited around it); s2 only in blob 1.
	if _, err := env.Store.WriteData(ctx, l, scope, store.DataOps{Findings: []store.Finding{
		occ("r", "s1", 1, 0, "a", 1, "c1"), occ("r", "s2", 1, 20, "a", 2, "c1"),
		occ("r", "s1", 2, 0, "a", 1, "c2"), occ("r", "s1", 3, 0, "a", 1, "c3"),
	}}); err != nil {
		t.Fatal(err)
	}
	basis, err := env.Store.PresenceBasis(ctx, scope)
	if err != nil || len(basis.Tips) != 0 || len(basis.Blobs) != 3 || basis.UpTo == 0 {
		t.Fatalf("basis: %+v, %v", basis, err)
	}

	status := func() map[string]store.PresenceStatus {
		t.Helper()
		p, err := env.Store.Secrets(ctx, scope, store.Page{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]store.PresenceStatus{}
		for _, s := range p.Secrets {
			out[s.SecretHash] = s.Status
		}
		return out
	}
	fence := l
	finalize := func(p *store.Presence) error {
		t.Helper()
		_, err := env.Store.Finalize(ctx, store.FinalizeInput{Lease: fence, ScopeID: scope, Complete: true, Presence: p})
		fence = acquire(t, shardID, "owner", time.Minute) // each finalize is one fence's
		return err
	}

	if got := status(); got["s1"] != store.Unknown || got["s2"] != store.Unknown {
		t.Fatalf("before any presence: %v", got)
	}
	// main's tip holds blob 3 only: s1 present, s2 removed.
	if err := finalize(&store.Presence{UpTo: basis.UpTo, Tips: map[string]string{"main": "t1"},
		Refs: map[string][][]byte{"main": {{3}}}}); err != nil {
		t.Fatal(err)
	}
	if got := status(); got["s1"] != store.Present || got["s2"] != store.Removed {
		t.Fatalf("after main at t1: %v", got)
	}
	occs, _ := env.Store.Occurrences(ctx, scope, []store.SecretKey{{RuleID: "r", SecretHash: "s1"}}, store.Page{})
	var per []store.PresenceStatus
	for _, o := range occs.Occurrences {
		per = append(per, o.Status)
	}
	if fmt.Sprint(per) != "[removed removed present]" {
		t.Errorf("occurrences of s1: %v", per)
	}

	// A secret found since is unknown until the next Complete scan.
	if _, err := env.Store.WriteData(ctx, fence, scope, store.DataOps{Findings: []store.Finding{occ("r", "s3", 4, 0, "b", 1, "c4")}}); err != nil {
		t.Fatal(err)
	}
	if got := status(); got["s3"] != store.Unknown || got["s1"] != store.Present {
		t.Fatalf("after a new finding: %v", got)
	}
	basis, _ = env.Store.PresenceBasis(ctx, scope)
	if basis.Tips["main"] != "t1" || len(basis.Blobs) != 4 {
		t.Fatalf("basis: %+v", basis)
	}

	tests := []struct {
		name    string
		p       store.Presence
		wantErr bool
		want    map[string]store.PresenceStatus
	}{
		{"main kept, dev computed", store.Presence{Tips: map[string]string{"main": "t1", "dev": "d1"},
			Refs: map[string][][]byte{"dev": {{4}, {1}}}}, false,
			map[string]store.PresenceStatus{"s1": store.Present, "s2": store.Present, "s3": store.Present}},
		{"a kept tip that moved", store.Presence{Tips: map[string]string{"main": "t2"}}, true, nil},
		{"a computed ref that is no tip", store.Presence{Tips: map[string]string{"main": "t1"},
			Refs: map[string][][]byte{"dev": nil}}, true, nil},
		{"dev gone", store.Presence{Tips: map[string]string{"main": "t1"}}, false,
			map[string]store.PresenceStatus{"s1": store.Present, "s2": store.Removed, "s3": store.Removed}},
		{"main moved on without the secrets", store.Presence{Tips: map[string]string{"main": "t2"},
			Refs: map[string][][]byte{"main": nil}}, false,
			map[string]store.PresenceStatus{"s1": store.Removed, "s2": store.Removed, "s3": store.Removed}},
		{"no refs at all", store.Presence{Tips: map[string]string{}}, false,
			map[string]store.PresenceStatus{"s1": store.Removed, "s2": store.Removed, "s3": store.Removed}},
		{"back in a tag", store.Presence{Tips: map[string]string{"refs/tags/v1": "t9"},
			Refs: map[string][][]byte{"refs/tags/v1": {{2}}}}, false,
			map[string]store.PresenceStatus{"s1": store.Present, "s2": store.Removed, "s3": store.Removed}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.p.UpTo = basis.UpTo
			err := finalize(&tt.p)
			if (err != nil) != tt.wantErr {
				t.Fatalf("finalize: %v, want error %t", err, tt.wantErr)
			}
			if tt.want != nil {
				if got := status(); fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Errorf("status %v, want %v", got, tt.want)
				}
			}
		})
	}

	// A Partial finalize leaves presence as it was.
	if _, err := env.Store.Finalize(ctx, store.FinalizeInput{Lease: fence, ScopeID: scope, Complete: false,
		Presence: &store.Presence{UpTo: basis.UpTo, Tips: map[string]string{}}}); err != nil {
		t.Fatal(err)
	}
	if got := status(); got["s1"] != store.Present {
		t.Fatalf("a Partial finalize changed presence: %v", got)
	}
}

// A secret found inside encoded text says how it was decoded, in the
// secret's listing and in each occurrence.
func TestDecodedFindingsSayHow(t *testing.T) {
	ctx := context.Background()
	shardID := newShard(t)
	scope, _ := env.Store.Scope(ctx, shardID, "p")
	l := acquire(t, shardID, "owner", time.Minute)
	plain, decoded := occ("gh", "s1", 1, 0, "a.env", 1, "c1"), occ("gh", "s2", 1, 40, "a.env", 2, "c1")
	decoded.Decoded = "base64/hex"
	if _, err := env.Store.WriteData(ctx, l, scope, store.DataOps{Findings: []store.Finding{plain, decoded}}); err != nil {
		t.Fatal(err)
	}
	secrets, err := env.Store.Secrets(ctx, scope, store.Page{})
	if err != nil || len(secrets.Secrets) != 2 {
		t.Fatalf("secrets: %+v, %v", secrets, err)
	}
	occs, err := env.Store.Occurrences(ctx, scope, nil, store.Page{})
	if err != nil || len(occs.Occurrences) != 2 {
		t.Fatalf("occurrences: %+v, %v", occs, err)
	}
	for i, want := range []string{"", "base64/hex"} {
		if got := secrets.Secrets[i].Decoded; got != want {
			t.Errorf("secret %d decoded %q, want %q", i, got, want)
		}
		if got := occs.Occurrences[i].Decoded; got != want {
			t.Errorf("occurrence %d decoded %q, want %q", i, got, want)
		}
	}
}

// Every path a blob holding findings was met at is recorded: the findings'
// own, and those a scan adds; the basis returns them.
func TestFindingPathsAreRecorded(t *testing.T) {
	ctx := context.Background()
	shardID := newShard(t)
	scope, _ := env.Store.Scope(ctx, shardID, "p")
	l := acquire(t, shardID, "owner", time.Minute)
	if _, err := env.Store.WriteData(ctx, l, scope, store.DataOps{
		Findings: []store.Finding{occ("r", "s1", 1, 0, "a/key", 1, "c1"), occ("r", "s2", 1, 20, "a/key", 2, "c1"), occ("r", "s3", 2, 0, "b", 1, "c1")},
		Paths:    []store.BlobPath{{Blob: []byte{1}, Path: "copy/key"}, {Blob: []byte{1}, Path: "a/key"}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.WriteData(ctx, l, scope, store.DataOps{Paths: []store.BlobPath{{Blob: []byte{2}, Path: "c"}, {Blob: []byte{2}, Path: "c"}}}); err != nil {
		t.Fatal(err)
	}
	basis, err := env.Store.PresenceBasis(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range basis.Paths {
		sort.Strings(ps)
	}
	want := map[string][]string{"\x01": {"a/key", "copy/key"}, "\x02": {"b", "c"}}
	if fmt.Sprint(basis.Paths) != fmt.Sprint(want) || !basis.PathsComplete {
		t.Errorf("paths %q (complete %t), want %q", basis.Paths, basis.PathsComplete, want)
	}
}

// Migration 00009 records the paths of the findings already there, and
// marks the scopes that had findings as lacking the other paths.
func TestMigrationRecordsFindingPaths(t *testing.T) {
	ctx := context.Background()
	if _, err := env.Store.Pool().Exec(ctx, `CREATE DATABASE m00009`); err != nil {
		t.Fatal(err)
	}
	old, err := store.Open(ctx, env.PG.URL("m00009"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := old.MigrateTo(ctx, 8); err != nil {
		t.Fatal(err)
	}
	scopes := map[string]int64{}
	for _, name := range []string{"with findings", "without"} {
		id, err := old.EnsureShard(ctx, shard.Spec{Key: "target:" + name,
			Target: target.Target{Location: "https://h/o/" + strings.ReplaceAll(name, " ", "-")}})
		if err != nil {
			t.Fatal(err)
		}
		if scopes[name], err = old.Scope(ctx, id, "p"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := old.Pool().Exec(ctx, `INSERT INTO findings (scope_id, rule_id, blob, start_offset, end_offset, line, path, commit_id, secret_hash, preview, secret_path)
		VALUES ($1, 'r', '\x01', 0, 8, 1, 'a/key', 'c1', 's1', '', ''), ($1, 'r', '\x01', 20, 28, 2, 'a/key', 'c1', 's2', '', '')`,
		scopes["with findings"]); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for name, id := range scopes {
		basis, err := old.PresenceBasis(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		wantPaths, wantComplete := "map[]", true
		if name == "with findings" {
			wantPaths, wantComplete = `map["\x01":["a/key"]]`, false
		}
		if got := fmt.Sprintf("%q", basis.Paths); got != wantPaths || basis.PathsComplete != wantComplete {
			t.Errorf("%s: paths %s (complete %t), want %s (%t)", name, got, basis.PathsComplete, wantPaths, wantComplete)
		}
	}
}

// Findings inside an archive are keyed by the file they are in: two files
// of one blob hold findings of one rule at one offset, a path-only rule
// finds each file, and every read says which file.
func TestArchiveFindingsNameTheirFile(t *testing.T) {
	ctx := context.Background()
	shardID := newShard(t)
	scope, _ := env.Store.Scope(ctx, shardID, "p")
	l := acquire(t, shardID, "owner", time.Minute)
	inA, inB := occ("r", "h1", 1, 0, "dist/app.jar", 2, "c1"), occ("r", "h2", 1, 0, "dist/app.jar", 2, "c1")
	inA.Archive, inB.Archive = "config/a.properties", "lib/x.tar.gz!b.env"
	pemA, pemB := occ("pem", "", 1, 0, "dist/app.jar", 0, "c1"), occ("pem", "", 1, 0, "dist/app.jar", 0, "c1")
	pemA.Archive, pemB.Archive = "a.pem", "b.pem"
	n, err := env.Store.WriteData(ctx, l, scope, store.DataOps{Findings: []store.Finding{inA, inB, pemA, pemB}})
	if err != nil || n != 4 {
		t.Fatalf("%d new secrets, %v; want 4", n, err)
	}
	secrets, err := env.Store.Secrets(ctx, scope, store.Page{})
	if err != nil || secrets.TotalOccurrences != 4 {
		t.Fatalf("secrets: %+v, %v", secrets, err)
	}
	var got []string
	for _, s := range secrets.Secrets {
		got = append(got, fmt.Sprintf("%s %s!%s:%d last %s!%s", s.RuleID, s.Path, s.Archive, s.Line, s.Last.Path, s.Last.Archive))
	}
	want := []string{"r dist/app.jar!config/a.properties:2 last dist/app.jar!config/a.properties",
		"r dist/app.jar!lib/x.tar.gz!b.env:2 last dist/app.jar!lib/x.tar.gz!b.env",
		"pem dist/app.jar!a.pem:0 last dist/app.jar!a.pem", "pem dist/app.jar!b.pem:0 last dist/app.jar!b.pem"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("secrets:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	occs, err := env.Store.Occurrences(ctx, scope, []store.SecretKey{{RuleID: "pem", File: "dist/app.jar!b.pem"}}, store.Page{})
	if err != nil || occs.Total != 1 || occs.Occurrences[0].Archive != "b.pem" {
		t.Errorf("occurrences of the path-only secret in b.pem: %+v, %v", occs, err)
	}
	fs, err := env.Store.Findings(ctx, shardID, 10)
	if err != nil || len(fs) != 4 || fs[0].Archive != "a.pem" {
		t.Errorf("findings: %+v, %v", fs, err)
	}
}

// Migration 00010 leaves the findings before it as they were: in no
// archive, a path-only rule's secret still its path.
func TestMigrationAddsArchives(t *testing.T) {
	ctx := context.Background()
	if _, err := env.Store.Pool().Exec(ctx, `CREATE DATABASE m00010`); err != nil {
		t.Fatal(err)
	}
	old, err := store.Open(ctx, env.PG.URL("m00010"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := old.MigrateTo(ctx, 9); err != nil {
		t.Fatal(err)
	}
	id, err := old.EnsureShard(ctx, shard.Spec{Key: "target:m10", Target: target.Target{Location: "https://h/o/m10"}})
	if err != nil {
		t.Fatal(err)
	}
	scope, err := old.Scope(ctx, id, "p")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Pool().Exec(ctx, `INSERT INTO findings (scope_id, rule_id, blob, start_offset, end_offset, line, path, commit_id, secret_hash, preview, secret_path)
		VALUES ($1, 'r', '\x01', 0, 8, 1, 'a/key', 'c1', 's1', '', ''), ($1, 'pem', '\x02', 0, 0, 0, 'x.pem', 'c1', '', '', 'x.pem')`, scope); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := old.Secrets(ctx, scope, store.Page{})
	if err != nil || len(p.Secrets) != 2 || p.Secrets[0].Archive != "" || p.Secrets[1].File != "x.pem" {
		t.Fatalf("secrets after the migration: %+v, %v", p, err)
	}
}
