package workflows_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
)

// A repository's file names never reach workflow history (architecture
// §11): a scan that fails on a blob at the repository's root (prod.env)
// or under a path with spaces parks with a reason that names the limit,
// and its whole history — inputs, results, failures, heartbeats, the park
// reason — holds neither the names, nor any word of them, nor their
// digests as they were once made (48 bits of their SHA-256, which anyone
// can compute for common names).
func TestHistoriesCarryNoPaths(t *testing.T) {
	for _, c := range []struct {
		name  string
		path  []string // directories, then the file
		words []string // what must not be in the history
	}{
		{name: "root", path: []string{"prod.env"}, words: []string{"prod.env", "prod"}},
		{name: "spaces", path: []string{"my secrets", "app config.env"},
			words: []string{"my secrets", "app config.env", "secrets/app", "config.env", "app config"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "repo.git")
			hugeBlobAt(c.path...).Write(t, dir)
			tg := normalized(t, target.Request{Location: dir})[0]
			res, run := scanToEnd(t, tg)
			if res.Status != shard.Parked || !strings.Contains(res.ParkReason, "over a limit") {
				t.Fatalf("scan: %+v, want parked over a limit", res)
			}
			full := strings.Join(c.path, "/")
			sum := sha256.Sum256([]byte(full))
			unkeyed := hex.EncodeToString(sum[:6])
			it := env.Client.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			events := 0
			for it.HasNext() {
				e, err := it.Next()
				if err != nil {
					t.Fatal(err)
				}
				events++
				text := e.String()
				for _, w := range append(c.words, unkeyed) {
					if strings.Contains(text, w) {
						t.Errorf("event %d (%s) holds %q: %.300s", e.GetEventId(), e.GetEventType(), w, text)
					}
				}
			}
			if events == 0 {
				t.Fatal("no history")
			}
		})
	}
}

// hugeBlobAt is a repository whose one commit holds, at path (directories
// then the file name), a blob that is a delta declaring a target of 2^40
// bytes: reading it stops at the object limit with an error naming the
// blob and its path.
func hugeBlobAt(path ...string) *gittest.Crafted {
	p := gittest.NewPack()
	blob := gittest.Hash("blob", []byte("a made-up name for "+strings.Join(path, "/")))
	_, base := p.Blob(make([]byte, gittest.ZeroBytes))
	p.OfsDelta(blob, base, gittest.NewDelta(gittest.ZeroBytes, 1<<40).Copy(0, 16))
	h, mode := blob, "100644"
	for i := len(path) - 1; i >= 0; i-- {
		var b bytes.Buffer
		fmt.Fprintf(&b, "%s %s\x00", mode, path[i])
		b.Write(h[:])
		h = gittest.Hash("tree", b.Bytes())
		p.Entry(h, gittest.Tree, uint64(b.Len()), nil, b.Bytes())
		mode = "40000"
	}
	raw := []byte("tree " + h.String() + "\nauthor T <t@example.invalid> 1700000000 +0000\n" +
		"committer T <t@example.invalid> 1700000000 +0000\n\nnames\n")
	commit := gittest.Hash("commit", raw)
	p.Entry(commit, gittest.Commit, uint64(len(raw)), nil, raw)
	return &gittest.Crafted{Name: "huge-blob-at-" + strings.Join(path, "-"), Pack: p, Commit: commit}
}
