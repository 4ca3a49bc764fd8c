package activities_test

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"testing"
	"time"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/domain/shard"
	"gitfleet/workflows"
)

// What a scan did not read inside archives reaches the run's counts, by
// reason, and a bomb cut short makes the run Partial (issue 31): a gzip of
// 2 GiB of zeros (about 2 MiB), a 7z, and a zip holding a rar, a 7z and a
// binary class beside a secret, next to an ordinary secret. Before, the
// run was Complete with no archive skip at all: the zeros were taken for
// one binary file, 7z and rar were not recognised, binary files went
// uncounted.
func TestArchiveSkipsReachTheRun(t *testing.T) {
	s := shards(t, time.Minute, 100)
	r := newBareRepo(t)
	zeros := gzipOf(t, make([]byte, 16<<20))
	tools := zipOf(t, map[string][]byte{
		"a.7z":          []byte("7z\xbc\xaf\x27\x1c\x00\x04rest"),
		"b.rar":         []byte("Rar!\x1a\x07\x01\x00rest"),
		"App.class":     []byte("\xca\xfe\xba\xbe\x00\x00\x00\x41\x00\x01"),
		"conf/ci.env":   []byte("GITHUB_TOKEN=" + gittest.FakePAT("Zp7") + "\n"),
		"conf/note.txt": []byte("nothing\n"),
	})
	r.commit(map[string]string{
		"bomb.gz":   r.blob(string(bytes.Repeat(zeros, 128))), // 2 GiB of zeros, as 128 gzip members
		"docs.7z":   r.blob("7z\xbc\xaf\x27\x1c\x00\x04docs"),
		"tools.zip": r.blob(string(tools)),
		"ci.env":    r.blob("GITHUB_TOKEN=" + ghToken + "\n"),
	})
	spec, shardID := localShard(t, s, r.dir)
	l := lease(t, s, shardID, "o")
	rc, err := s.ScanShard(context.Background(), workflows.ShardWork{Lease: l, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	want := shard.ArchiveSkips{Bytes: 1, Unsupported: 3, Binary: 1}
	if rc.Complete || !rc.Covered || rc.ArchiveSkips != want {
		t.Errorf("complete %t covered %t archive skips %+v; want Partial, covered, %+v", rc.Complete, rc.Covered, rc.ArchiveSkips, want)
	}
	m := rc.Counts.Breakdown()
	if m["archive.expandedSize"] != 1 || m["archive.unsupported"] != 3 || m["archive.binary"] != 1 {
		t.Errorf("breakdown %v", m)
	}
	if st, err := s.CheckpointShard(context.Background(), workflows.CheckpointInput{Lease: l, ReceiptID: rc.ID}); err != nil || st != shard.Done {
		t.Errorf("checkpoint: %s, %v; want Done (nothing a later run could read)", st, err)
	}
	got := map[string]bool{}
	for k := range findingSet(t, shardID) {
		got[k.path] = true
	}
	if len(got) != 2 || !got["ci.env"] || !got["tools.zip"] {
		t.Errorf("findings at %v, want ci.env and tools.zip", got)
	}
}

func gzipOf(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func zipOf(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for name, b := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
