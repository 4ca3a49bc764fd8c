package scan

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// syntheticSource is about size bytes of source-like text (Go, Python, YAML
// and JavaScript lines over a programming vocabulary). About one line in 300
// uses a word that is a keyword of the default rules (token, secret,
// password, …), as real code does. planted secrets from the positive examples
// are inserted at even intervals.
func syntheticSource(size, planted int) []byte {
	g := newGen(42)
	words := strings.Fields(`request response handler config value index buffer client server user name
		count result data items options path file line error status message logger cache session timeout
		retry queue worker job batch offset limit cursor record field schema table column query row
		node tree graph edge parent child left right start end begin next prev size length width height
		url host port scheme route method header body payload event stream reader writer encoder decoder`)
	hot := strings.Fields(`tokenizer nextToken secretName passwordHash apiKeyHeader credentials authToken`)
	ident := func() string {
		if g.r.IntN(300) == 0 {
			return hot[g.r.IntN(len(hot))]
		}
		w := words[g.r.IntN(len(words))]
		if g.r.IntN(3) == 0 {
			w += strings.ToUpper(words[g.r.IntN(len(words))][:1]) + words[g.r.IntN(len(words))][1:]
		}
		return w
	}
	templates := []func() string{
		func() string {
			return fmt.Sprintf("\tif %s != nil {\n\t\treturn %s, fmt.Errorf(\"%s: %%w\", err)\n\t}\n", ident(), ident(), ident())
		},
		func() string { return fmt.Sprintf("\t%s := %s.%s(ctx, %s)\n", ident(), ident(), ident(), ident()) },
		func() string {
			return fmt.Sprintf("func (s *%s) %s(%s string, %s int) (*%s, error) {\n", ident(), ident(), ident(), ident(), ident())
		},
		func() string {
			return fmt.Sprintf("    def %s(self, %s, %s=None):\n        return self.%s[%s]\n", ident(), ident(), ident(), ident(), ident())
		},
		func() string {
			return fmt.Sprintf("  %s: %d\n  %s: \"%s\"\n", ident(), g.r.IntN(1000), ident(), ident())
		},
		func() string {
			return fmt.Sprintf("const %s = await %s.%s({ %s: %s, %s: %d });\n", ident(), ident(), ident(), ident(), ident(), ident(), g.r.IntN(99))
		},
		func() string {
			return fmt.Sprintf("// %s the %s of the %s before the %s.\n", ident(), ident(), ident(), ident())
		},
		func() string { return "}\n\n" },
	}
	pos := secretSamples()
	var b strings.Builder
	every := size / (planted + 1)
	next := every
	for b.Len() < size {
		b.WriteString(templates[g.r.IntN(len(templates))]())
		if planted > 0 && b.Len() >= next {
			b.WriteString(pos[g.r.IntN(len(pos))].text + "\n")
			next += every
			planted--
		}
	}
	return []byte(b.String())
}

// goSources is real Go source text from the toolchain (every Go
// installation ships its sources under GOROOT/src).
func goSources(tb testing.TB) []byte {
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		tb.Fatalf("go env GOROOT: %v", err)
	}
	root := strings.TrimSpace(string(goroot))
	var out []byte
	for _, dir := range []string{"net/http", "crypto/tls"} {
		files, _ := filepath.Glob(filepath.Join(root, "src", dir, "*.go"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err == nil {
				out = append(out, b...)
			}
		}
	}
	if len(out) < 1<<20 {
		tb.Fatalf("Go sources not found under %s/src: the gosrc corpus needs the toolchain's sources", root)
	}
	return out
}

// split cuts text into blobs of about n bytes at line ends, like files.
func split(text []byte, n int) [][]byte {
	var blobs [][]byte
	for len(text) > 0 {
		end := min(n, len(text))
		for end < len(text) && text[end-1] != '\n' {
			end++
		}
		blobs = append(blobs, text[:end])
		text = text[end:]
	}
	return blobs
}

func BenchmarkScan(b *testing.B) {
	rs, err := Default()
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(rs, DefaultConfig(), testKey)
	if err != nil {
		b.Fatal(err)
	}
	const size = 4 << 20
	corpora := []struct {
		name   string
		text   func(testing.TB) []byte
		minHit int
	}{
		{"clean", func(testing.TB) []byte { return syntheticSource(size, 0) }, 0},
		{"planted", func(testing.TB) []byte { return syntheticSource(size, 8) }, 8},
		{"gosrc", goSources, 0},
	}
	for _, c := range corpora {
		for _, blobSize := range []int{size, 16 << 10} {
			name := fmt.Sprintf("%s/blob=%dKiB", c.name, blobSize>>10)
			b.Run(name, func(b *testing.B) {
				text := c.text(b)
				blobs := split(text, blobSize)
				found := 0
				for _, blob := range blobs {
					found += len(s.Scan("src/file.go", blob, "").Findings)
				}
				if found < c.minHit {
					b.Fatalf("%d findings, want at least %d", found, c.minHit)
				}
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					for _, blob := range blobs {
						s.Scan("src/file.go", blob, "")
					}
				}
			})
		}
	}
}

// BenchmarkKeywordPass is the floor: the automaton alone.
func BenchmarkKeywordPass(b *testing.B) {
	rs, _ := Default()
	text := syntheticSource(4<<20, 0)
	sc := newScratch(rs)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rs.kw.scan(text, sc)
		sc.reset()
	}
}
