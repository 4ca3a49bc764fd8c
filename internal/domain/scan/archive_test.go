package scan

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"gitfleet/internal/domain/archive"
)

// Archives for the tests, built in memory: a name and content per file.
type entry struct{ name, content string }

func zipBytes(t testing.TB, es ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, e := range es {
		w, err := zw.Create(e.name)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, e.content)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func tgzBytes(t testing.TB, es ...entry) []byte {
	t.Helper()
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, e := range es {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.content))}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.content)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return gzBytes(t, tb.Bytes())
}

func gzBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// found is a finding as the tests compare it: the display path, rule and
// line, and the secret's text when the test knows the file it is in.
func found(path string, f Finding, files map[string]string) string {
	at := path
	if f.Archive != "" {
		at += "!" + f.Archive
	}
	s := fmt.Sprintf("%s:%d %s", at, f.Line, f.RuleID)
	if c, ok := files[f.Archive]; ok && f.End > f.Start && f.Decoded == "" {
		s += " " + c[f.Start:f.End]
	}
	if f.Decoded != "" {
		s += " (" + f.Decoded + ")"
	}
	return s
}

func TestArchivesAreScanned(t *testing.T) {
	rs := mustLoad(t, `
[[rules]]
id = "demo-key"
regex = '''demo_[a-z0-9]{16}'''
keywords = ["demo_"]

[[rules]]
id = "properties-file"
path = '''\.properties$'''

[[allowlists]]
paths = ['''^vendor/''']
`)
	g := newGen(11)
	key := func() string { return "demo_" + g.s(lowerChars+digitChars, 16) }
	k1, k2, k3, k4, k5, k6 := key(), key(), key(), key(), key(), key()
	props := "# settings\napi.key=" + k1 + "\n"
	inner := zipBytes(t, entry{"deep/.env", "A=1\nKEY=" + k2 + "\n"})
	jar := zipBytes(t,
		entry{"META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n"},
		entry{"com/example/App.class", "\xca\xfe\xba\xbe\x00\x00" + k3}, // binary: skipped
		entry{"config/application.properties", props},
		entry{"vendor/lib.env", "KEY=" + k4 + "\n"}, // allowlisted by its name in the jar
		entry{"lib/bundle.tar.gz", string(tgzBytes(t, entry{"./inner.zip", string(inner)}))},
		entry{"encoded.txt", "blob: " + base64.StdEncoding.EncodeToString([]byte("key "+k5+" end")) + "\n"},
	)
	files := map[string]string{"config/application.properties": props, "lib/bundle.tar.gz!inner.zip!deep/.env": "A=1\nKEY=" + k2 + "\n"}

	for _, tc := range []struct {
		name    string
		cfg     func(*Config)
		path    string
		content []byte
		want    []string
		skipped SkipReason
		partial bool
		skips   []string
	}{
		{name: "a jar: nested archives, path rules, allowlists and decoding inside", path: "dist/app.jar", content: jar,
			want: []string{
				"dist/app.jar!config/application.properties:0 properties-file",
				"dist/app.jar!config/application.properties:2 demo-key " + k1,
				"dist/app.jar!lib/bundle.tar.gz!inner.zip!deep/.env:2 demo-key " + k2,
				"dist/app.jar!encoded.txt:1 demo-key (base64)",
			},
			skips: []string{"com/example/App.class: binary"}},
		{name: "archives off: a binary blob", cfg: func(c *Config) { c.ArchiveDepth = 0 }, path: "dist/app.jar", content: jar,
			skipped: SkipBinary},
		{name: "depth 1: the tar.gz is not opened", cfg: func(c *Config) { c.ArchiveDepth = 1 }, path: "dist/app.jar", content: jar,
			want: []string{
				"dist/app.jar!config/application.properties:0 properties-file",
				"dist/app.jar!config/application.properties:2 demo-key " + k1,
				"dist/app.jar!encoded.txt:1 demo-key (base64)",
			},
			skips: []string{"com/example/App.class: binary", "lib/bundle.tar.gz: depth"}},
		{name: "a gzipped file is scanned at its own path", path: "notes.txt.gz", content: gzBytes(t, []byte("x\nKEY="+k6+"\n")),
			want: []string{"notes.txt.gz:2 demo-key"}},
		{name: "a path rule on the archive itself, once", path: "conf.properties", content: gzBytes(t, []byte("nothing\n")),
			want: []string{"conf.properties:0 properties-file"}},
		{name: "a bomb ends the walk, what came before stands", path: "bomb.zip",
			content: zipBytes(t, entry{"first.txt", "KEY=" + k6 + "\n"}, entry{"bomb.txt", strings.Repeat("a", 40<<20)}),
			want:    []string{"bomb.zip!first.txt:1 demo-key"}, skips: []string{"bomb.txt: ratio"}, partial: true},
		{name: "a file over MaxBlobBytes", cfg: func(c *Config) { c.MaxBlobBytes = 1000 }, path: "big.zip",
			content: zipBytes(t, entry{"big.properties", strings.Repeat("#\n", 600) + k6}, entry{"small.txt", k1}),
			want:    []string{"big.zip!big.properties:0 properties-file", "big.zip!small.txt:1 demo-key"},
			skips:   []string{"big.properties: entry-size"}, partial: true},
		{name: "a damaged archive is a binary blob, and says why", path: "broken.zip", content: jar[:len(jar)/2],
			skipped: SkipBinary, skips: []string{": corrupt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			s, err := New(rs, cfg, testKey)
			if err != nil {
				t.Fatal(err)
			}
			res := s.Scan(tc.path, tc.content, "")
			var got []string
			for _, f := range res.Findings {
				got = append(got, found(tc.path, f, files))
				for _, secret := range []string{k1, k2, k3, k4, k5, k6} {
					assertNoSecret(t, f, secret)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if res.Skipped != tc.skipped || res.Partial != tc.partial {
				t.Errorf("skipped %q partial %t, want %q %t", res.Skipped, res.Partial, tc.skipped, tc.partial)
			}
			var skips []string
			for _, k := range res.ArchiveSkips {
				skips = append(skips, k.Path+": "+string(k.Reason))
			}
			if !slices.Equal(skips, tc.skips) {
				t.Errorf("archive skips %q, want %q", skips, tc.skips)
			}
		})
	}
}

// What opens archives, and how far, decides what is found: it is part of
// the policy, the zero limits being the defaults.
func TestArchivePolicy(t *testing.T) {
	rs := mustDefault(t)
	policy := func(f func(*Config)) string {
		cfg := DefaultConfig()
		f(&cfg)
		s, err := New(rs, cfg, testKey)
		if err != nil {
			t.Fatal(err)
		}
		return s.Policy()
	}
	base := policy(func(*Config) {})
	for name, f := range map[string]func(*Config){
		"off":     func(c *Config) { c.ArchiveDepth = 0 },
		"depth":   func(c *Config) { c.ArchiveDepth = 3 },
		"bytes":   func(c *Config) { c.ArchiveLimits.Bytes = 1 << 20 },
		"entries": func(c *Config) { c.ArchiveLimits.Entries = 5 },
		"ratio":   func(c *Config) { c.ArchiveLimits.Ratio = 7 },
	} {
		if policy(f) == base {
			t.Errorf("%s: the policy did not change", name)
		}
	}
	if policy(func(c *Config) { c.ArchiveLimits = archive.Limits{} }) != base {
		t.Error("zero limits are not the defaults")
	}
	if policy(func(c *Config) { c.ArchiveDepth = -1 }) != policy(func(c *Config) { c.ArchiveDepth = 0 }) {
		t.Error("a negative depth is not off")
	}
	s := newTestScanner(t, rs)
	if s.WithArchiveDepth(0).Policy() != policy(func(c *Config) { c.ArchiveDepth = 0 }) || s.WithArchiveDepth(0).Config().ArchiveDepth != 0 {
		t.Error("WithArchiveDepth(0) is not archives off")
	}
}
