package archive

import (
	"archive/tar"
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gitfleet/internal/devstack/bombs"
)

func TestWalk(t *testing.T) {
	class := "\xca\xfe\xba\xbe\x00\x00\x00\x41" + strings.Repeat("\x00\x01", 100) // a Java class: binary
	inner := zipOf(t, f("deep/app.env", "TOKEN=inner\n"))
	bundle := gz(t, tarOf(t, f("./inner.zip", string(inner)), f("notes.txt", "notes\n")))
	nested := zipOf(t, f("README", "top\n"), f("lib/bundle.tar.gz", string(bundle)))
	level := func(name, content string) []byte { return zipOf(t, f(name, content)) }
	l4 := level("secret.txt", "four\n")
	l3 := level("l4.zip", string(l4))
	l2 := level("l3.zip", string(l3))
	l1 := level("l2.zip", string(l2))
	tiny := make([]file, 300)
	for i := range tiny {
		tiny[i] = f(fmt.Sprintf("t/%03d", i), "x")
	}
	tinyFiles := map[string]string{}
	for _, x := range tiny[:100] {
		tinyFiles[x.name] = x.content
	}
	lorem := func(n int) string { return strings.Repeat("lorem ipsum dolor ", n/18+1)[:n] }
	stored := zipOf(t, file{name: "good.txt", content: "good\n", stored: true}, file{name: "bad.txt", content: "damaged entry\n", stored: true})
	noise := newNoise(20000)
	truncatedTgz := gz(t, tarOf(t, f("a.txt", "first\n"), f("b.txt", noise)))
	truncatedTgz = truncatedTgz[:len(truncatedTgz)-2000]
	badCRC := gz(t, []byte("checked at the end\n"))
	badCRC[len(badCRC)-8] ^= 0xff

	for _, tc := range []struct {
		name    string
		content []byte
		opt     Options
		files   map[string]string
		opened  []string
		skipped []string
		skips   []string // "path: reason"
	}{
		{name: "zip", content: zipOf(t, f("a.txt", "alpha\n"), dir("d"), f("d/b.txt", "beta\n")), opt: opts(8),
			files: map[string]string{"a.txt": "alpha\n", "d/b.txt": "beta\n"}},
		{name: "jar: classes are binary, skipped unread and counted", opt: opts(8),
			content: zipOf(t, f("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n"), f("com/example/App.class", class),
				f("config/application.properties", "db.password=hunter2\n")),
			files:   map[string]string{"META-INF/MANIFEST.MF": "Manifest-Version: 1.0\n", "config/application.properties": "db.password=hunter2\n"},
			skipped: []string{"com/example/App.class"}, skips: []string{"com/example/App.class: binary"}},
		{name: "gzip of a binary file: read to its end, counted", content: gz(t, []byte(class)), opt: opts(8),
			skips: []string{": binary"}},
		{name: "7z: not opened, counted", content: sevenZipOf("secret.txt"), opt: opts(8), skips: []string{": unsupported"}},
		{name: "rar 4: not opened, counted", content: []byte("Rar!\x1a\x07\x00\xcf\x90\x73\x00\x00\x0d\x00"), opt: opts(8),
			skips: []string{": unsupported"}},
		{name: "rar 5: not opened, counted", content: []byte("Rar!\x1a\x07\x01\x00\x33\x92\xb5\xe5\x0a\x01\x05"), opt: opts(8),
			skips: []string{": unsupported"}},
		{name: "7z and rar in a zip, and in a tar.gz", opt: opts(8),
			content: zipOf(t, f("a.7z", string(sevenZipOf("x"))), f("b.rar", "Rar!\x1a\x07\x01\x00rest"), f("c.txt", "c\n"),
				f("d.tgz", string(gz(t, tarOf(t, f("e.7z", string(sevenZipOf("y")))))))),
			files:   map[string]string{"c.txt": "c\n"},
			opened:  []string{"d.tgz"},
			skipped: []string{"a.7z", "b.rar", "d.tgz!e.7z"},
			skips:   []string{"a.7z: unsupported", "b.rar: unsupported", "d.tgz!e.7z: unsupported"}},
		{name: "gzip of 2 GiB of zeros: cut short at the limit, not passed as binary", content: zerosGzip(t, 2<<30), opt: opts(8),
			skips: []string{": expanded-size"}},
		{name: "zip in tar.gz in zip", content: nested, opt: opts(8),
			files:  map[string]string{"README": "top\n", "lib/bundle.tar.gz!inner.zip!deep/app.env": "TOKEN=inner\n", "lib/bundle.tar.gz!notes.txt": "notes\n"},
			opened: []string{"lib/bundle.tar.gz", "lib/bundle.tar.gz!inner.zip"}},
		{name: "tar: directories and links have no content", opt: opts(8),
			content: tarOf(t, dir("d"), f("d/a.txt", "a\n"), file{name: "d/link", typ: tar.TypeSymlink}),
			files:   map[string]string{"d/a.txt": "a\n"}},
		{name: "tar.gz is one level", content: gz(t, tarOf(t, f("a.txt", "a\n"))), opt: opts(1),
			files: map[string]string{"a.txt": "a\n"}},
		{name: "zip.xz is one level", content: xzOf(t, zipOf(t, f("a.txt", "a\n"))), opt: opts(1),
			files: map[string]string{"a.txt": "a\n"}},
		{name: "gzip of a text file: its content at the stream's path", content: gz(t, []byte("hello\n")), opt: opts(1),
			files: map[string]string{"": "hello\n"}},
		{name: "bzip2", content: bz2Hello, opt: opts(1), files: map[string]string{"": "bzip2 says hello\n"}},
		{name: "zstd", content: zst(t, []byte("zstd says hello\n")), opt: opts(1), files: map[string]string{"": "zstd says hello\n"}},
		{name: "xz", content: xzOf(t, []byte("xz says hello\n")), opt: opts(1), files: map[string]string{"": "xz says hello\n"}},
		{name: "snappy", content: snappy(t, []byte("snappy says hello\n")), opt: opts(1), files: map[string]string{"": "snappy says hello\n"}},
		{name: "zip entries compressed with bzip2", opt: opts(1),
			content: zipOf(t, file{name: "b.txt", content: "bzip2 says hello\n", method: zipBzip2, raw: string(bz2Hello)}),
			files:   map[string]string{"b.txt": "bzip2 says hello\n"}},
		{name: "a compressed stream in a compressed stream is one level deeper", content: gz(t, gz(t, []byte("twice\n"))), opt: opts(1),
			skips: []string{": depth"}},
		{name: "twice compressed, depth 2", content: gz(t, gz(t, []byte("twice\n"))), opt: opts(2),
			files: map[string]string{"": "twice\n"}},
		{name: "nesting beyond the depth", content: l1, opt: opts(3),
			opened: []string{"l2.zip", "l2.zip!l3.zip"}, skipped: []string{"l2.zip!l3.zip!l4.zip"},
			skips: []string{"l2.zip!l3.zip!l4.zip: depth"}},
		{name: "nesting within the depth", content: l1, opt: opts(4),
			opened: []string{"l2.zip", "l2.zip!l3.zip", "l2.zip!l3.zip!l4.zip"}, files: map[string]string{"l2.zip!l3.zip!l4.zip!secret.txt": "four\n"}},
		{name: "depth 0 opens nothing", content: l1, opt: opts(0), skips: []string{": depth"}},
		{name: "zip bomb: the ratio stops it", content: zipOf(t, f("ok.txt", "ok\n"), f("bomb.txt", strings.Repeat("a", 40<<20))), opt: opts(8),
			files: map[string]string{"ok.txt": "ok\n"}, skips: []string{"bomb.txt: ratio"}},
		{name: "many tiny entries", content: zipOf(t, tiny...),
			opt:   Options{Depth: 1, Limits: Limits{Entries: 100}},
			files: tinyFiles, skips: []string{": entries"}},
		{name: "expanded bytes", content: zipOf(t, f("1.txt", lorem(40000)), f("2.txt", lorem(40000)), f("3.txt", "three\n")),
			opt:   Options{Depth: 1, Limits: Limits{Bytes: 64 << 10, Ratio: 1 << 30}},
			files: map[string]string{"1.txt": lorem(40000)}, skips: []string{"2.txt: expanded-size"}},
		{name: "a file over the entry size", content: zipOf(t, f("big.txt", lorem(200)), f("small.txt", "small\n")),
			opt:   Options{Depth: 1, MaxEntryBytes: 100},
			files: map[string]string{"small.txt": "small\n"}, skipped: []string{"big.txt"}, skips: []string{"big.txt: entry-size"}},
		{name: "a nested zip over the entry size", content: zipOf(t, f("in.zip", string(zipOf(t, file{name: "x", content: lorem(500), stored: true})))),
			opt:    Options{Depth: 2, MaxEntryBytes: 300},
			opened: []string{"in.zip"}, skips: []string{"in.zip: entry-size"}},
		{name: "truncated tar.gz: one skip, the archive's", content: truncatedTgz, opt: opts(8),
			files: map[string]string{"a.txt": "first\n"}, skips: []string{": corrupt"}},
		{name: "truncated zip", content: nested[:len(nested)-30], opt: opts(8), skips: []string{": corrupt"}},
		{name: "a damaged zip entry ends only itself", content: flip(stored, "damaged"), opt: opts(8),
			files: map[string]string{"good.txt": "good\n"}, skips: []string{"bad.txt: corrupt"}},
		{name: "gzip checksum", content: badCRC, opt: opts(8), skips: []string{": corrupt"}},
		{name: "empty zip", content: zipOf(t), opt: opts(8)},
		{name: "empty gzip", content: gz(t, nil), opt: opts(8), files: map[string]string{"": ""}},
		{name: "empty bzip2", content: bz2Empty, opt: opts(8), files: map[string]string{"": ""}},
		{name: "encrypted zip entry", content: zipOf(t, file{name: "secret.txt", content: "?", flags: 1}, f("plain.txt", "p\n")), opt: opts(8),
			files: map[string]string{"plain.txt": "p\n"}, skipped: []string{"secret.txt"}, skips: []string{"secret.txt: encrypted"}},
		{name: "unsupported zip method", content: zipOf(t, file{name: "lzma.bin", content: "x", method: 14, raw: "x"}), opt: opts(8),
			skipped: []string{"lzma.bin"}, skips: []string{"lzma.bin: unsupported"}},
		{name: "sparse tar file", content: sparseTar(t, "holes", "abc", f("after.txt", "after\n")), opt: opts(8),
			files: map[string]string{"after.txt": "after\n"}, skipped: []string{"holes"}, skips: []string{"holes: unsupported"}},
		{name: "zstd window over the limit", content: zstdFrameOfWindow(30), opt: opts(8), skips: []string{": memory"}},
		{name: "xz dictionary over the limit", content: xzOfDict(t, 40), opt: opts(8), skips: []string{": memory"}},
		{name: "xz block the index hides, over the limit", content: xzHiddenBlock(t, 40), opt: opts(8),
			files: map[string]string{}, skips: []string{": memory"}},
		{name: "path tricks are shown, escaped, never resolved", opt: opts(8),
			content: zipOf(t, f("../../etc/passwd", "1"), f("/abs/key.pem", "2"), f("./dot/x", "3"), f("nul\x00name", "4"),
				f("line\nbreak", "5"), f("\u202etxt.exe", "6"), f("bad\xffutf8", "7")),
			files: map[string]string{"../../etc/passwd": "1", "/abs/key.pem": "2", "dot/x": "3", `nul\x00name`: "4",
				`line\x0abreak`: "5", `\u202etxt.exe`: "6", `bad\xffutf8`: "7"}},
		{name: "not an archive", content: []byte("plain text\n"), opt: opts(8)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := walk(tc.content, tc.opt)
			if tc.files == nil {
				tc.files = map[string]string{}
			}
			if !maps.Equal(got.files, tc.files) {
				t.Errorf("files %s, want %s", keys(got.files), keys(tc.files))
			}
			if !slices.Equal(got.opened, tc.opened) {
				t.Errorf("opened %q, want %q", got.opened, tc.opened)
			}
			if !slices.Equal(got.skipped, tc.skipped) {
				t.Errorf("skipped %q, want %q", got.skipped, tc.skipped)
			}
			var skips []string
			for _, s := range got.skips {
				skips = append(skips, s.Path+": "+string(s.Reason))
				if s.Detail == "" && s.Reason != SkipEncrypted {
					t.Errorf("%s: %s without a detail", s.Path, s.Reason)
				}
			}
			if !slices.Equal(skips, tc.skips) {
				t.Errorf("skips %q, want %q (%+v)", skips, tc.skips, got.skips)
			}
		})
	}
}

// sevenZipOf is the start of a 7z archive (its signature header); name
// only makes archives differ.
func sevenZipOf(name string) []byte {
	return append([]byte("7z\xbc\xaf\x27\x1c\x00\x04"), name...)
}

// zerosGzip is a gzip of n bytes of zeros (n a multiple of 16 MiB), as
// members of 16 MiB each (a gzip reader reads them as one stream): some
// 16 KiB a member, so 2 GiB is about 2 MiB.
func zerosGzip(t testing.TB, n int64) []byte {
	const member = 16 << 20
	one := gz(t, make([]byte, member))
	return bytes.Repeat(one, int(n/member))
}

func keys(m map[string]string) string {
	var k []string
	for p, c := range m {
		k = append(k, strconv.Quote(p)+"("+strconv.Itoa(len(c))+")")
	}
	slices.Sort(k)
	return "[" + strings.Join(k, " ") + "]"
}

// flip damages the first occurrence of s in b (a stored entry's data).
func flip(b []byte, s string) []byte {
	b = bytes.Clone(b)
	i := bytes.Index(b, []byte(s))
	if i < 0 {
		panic("flip: " + s + " not found")
	}
	b[i] ^= 0x20
	return b
}

// zstdFrameOfWindow is a zstd frame whose header asks for a 2^log-byte window,
// then holds five raw bytes.
func zstdFrameOfWindow(log int) []byte {
	b := append([]byte{}, zstdMagic...)
	b = append(b, 0x00, byte(log-10)<<3) // no single segment, no checksum; window descriptor
	b = append(b, 5<<3|1, 0, 0)          // the last block, raw, 5 bytes
	return append(b, "hello"...)
}

// xzOfDict is an xz file whose block asks for an LZMA2 dictionary of
// property bits (40: 4 GiB), its header's checksum made right.
func xzOfDict(t *testing.T, bits byte) []byte {
	b := xzOf(t, []byte("xz says hello\n"))
	if err := bombs.SetXzDictionary(b[12:], bits); err != nil {
		t.Fatal(err)
	}
	return b
}

// xzHiddenBlock is bombs.XzHiddenBlock, the attack on a guard that reads
// the stream's index.
func xzHiddenBlock(t *testing.T, bits byte) []byte {
	t.Helper()
	b, err := bombs.XzHiddenBlock(bits)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDetect(t *testing.T) {
	ustar := tarOf(t, f("a", "a"))
	badSum := bytes.Clone(ustar)
	badSum[0] ^= 1
	for _, tc := range []struct {
		name string
		b    []byte
		want Format
	}{
		{"zip", zipOf(t, f("a", "a")), Zip},
		{"empty zip", zipOf(t), Zip},
		{"tar", ustar, Tar},
		{"tar with a wrong checksum", badSum, None},
		{"tar header cut short", ustar[:300], None},
		{"gzip", gz(t, []byte("x")), Gzip},
		{"bzip2", bz2Hello, Bzip2},
		{"empty bzip2", bz2Empty, Bzip2},
		{"text that starts like bzip2", []byte("BZh9 is not a bzip2 stream\n"), None},
		{"zstd", zst(t, []byte("x")), Zstd},
		{"xz", xzOf(t, []byte("x")), Xz},
		{"snappy", snappy(t, []byte("x")), Snappy},
		{"text", []byte("PK is a prefix of text too\n"), None},
		{"empty", nil, None},
		{"one byte", []byte{0x1f}, None},
	} {
		if got := Detect(tc.b); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// A bomb costs what the limits allow, not what it expands to: a zip of
// 40 MiB of text and an xz of as much text allocate a few MiB at most.
func TestWalkMemoryIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content []byte
	}{
		{"zip of text", zipOf(t, f("bomb.txt", strings.Repeat("a", 40<<20)))},
		{"nested zips", zipOf(t, f("in.zip", string(zipOf(t, f("bomb.txt", strings.Repeat("a", 40<<20))))))},
		{"xz of text", xzOf(t, bytes.Repeat([]byte("a"), 40<<20))},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		got := walk(tc.content, opts(8))
		runtime.ReadMemStats(&after)
		if len(got.skips) != 1 || (got.skips[0].Reason != SkipRatio && got.skips[0].Reason != SkipEntrySize) {
			t.Errorf("%s: skips %+v", tc.name, got.skips)
		}
		// The xz reader's dictionary (8 MiB) is the largest allocation.
		if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
			t.Errorf("%s: %d MiB allocated", tc.name, n>>20)
		}
	}
}

// An xz block's dictionary is refused before it is allocated, wherever the
// block is: a 324-byte blob whose index hid its second block cost 1 GiB of
// heap (4 GiB with property bits 40: a fatal out of memory under a limit).
func TestXzDictionaryRefusedBeforeAllocation(t *testing.T) {
	attack := xzHiddenBlock(t, 36) // 1 GiB
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got := walk(attack, opts(8))
	runtime.ReadMemStats(&after)
	if len(got.skips) != 1 || got.skips[0].Reason != SkipMemory {
		t.Errorf("skips %+v, want one for memory", got.skips)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > DefaultMemory {
		t.Errorf("a %d-byte blob allocated %d MiB", len(attack), n>>20)
	}
}

// The package never touches the file system: inner paths are only shown.
func TestNoFileSystem(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range file.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "os" || p == "path/filepath" || p == "io/fs" {
				t.Errorf("%s imports %s", name, p)
			}
		}
	}
}

func TestReasonsAreDescribed(t *testing.T) {
	for _, r := range Reasons() {
		if r.Describe() == string(r) || r.Describe() == "" {
			t.Errorf("%s has no words", r)
		}
	}
	if len(reasonWords) != len(Reasons()) {
		t.Errorf("%d reasons described, %d listed", len(reasonWords), len(Reasons()))
	}
}

// Whatever the bytes, a walk ends: no panic, every file within the
// limits, every skip with a reason.
func FuzzWalk(fz *testing.F) {
	inner := zipOf(fz, f("deep/app.env", "TOKEN=inner\n"))
	for _, seed := range [][]byte{
		zipOf(fz, f("a.txt", "alpha\n"), dir("d")),
		tarOf(fz, f("a.txt", "a\n")),
		gz(fz, tarOf(fz, f("./inner.zip", string(inner)))),
		gz(fz, []byte("hello\n")),
		bz2Hello,
		zst(fz, []byte("zstd\n")),
		xzOf(fz, zipOf(fz, f("x", "x"))),
		snappy(fz, []byte("snappy\n")),
		zstdFrameOfWindow(30),
	} {
		fz.Add(seed)
		fz.Add(seed[:len(seed)/2])
	}
	fz.Fuzz(func(t *testing.T, b []byte) {
		opt := Options{Depth: 4, MaxEntryBytes: 1 << 16, Limits: Limits{Bytes: 1 << 20, Entries: 100}, Binary: isBinary, SniffLen: 8000}
		for _, s := range Walk(b, opt, func(e Entry) {
			if len(e.Content) > 1<<16 {
				t.Fatalf("%s: %d bytes", e.Path, len(e.Content))
			}
		}) {
			if s.Reason == "" {
				t.Fatalf("a skip without a reason: %+v", s)
			}
		}
	})
}

// A text file larger than a part may be is passed on in parts overlapping
// by Overlap: their kept ranges tile the file, each part says where it is
// (offset, lines and column before it), no part is larger than the size
// limit or the walk's memory, and Limits.Bytes still ends the walk. Before,
// the file was skipped whole (entry-size).
func TestWalkInParts(t *testing.T) {
	var text strings.Builder
	for i := 0; text.Len() < 600<<10; i++ {
		fmt.Fprintf(&text, "line %d %s\n", i, strings.Repeat("x", i%97))
	}
	whole := text.String()
	for _, tc := range []struct {
		name    string
		content []byte
		opt     Options
		path    string
		maxPart int
		read    int // bytes of the file the parts tile
		skips   []string
	}{
		{name: "gzip, parts of the size limit", content: gz(t, []byte(whole)),
			opt: Options{Depth: 1, MaxEntryBytes: 64 << 10, Overlap: 8 << 10}, maxPart: 64 << 10, read: len(whole)},
		{name: "a zip entry", content: zipOf(t, f("big.log", whole), f("small.txt", "s\n")), path: "big.log",
			opt: Options{Depth: 1, MaxEntryBytes: 100 << 10, Overlap: 10 << 10}, maxPart: 100 << 10, read: len(whole)},
		{name: "parts of what the memory leaves", content: gz(t, []byte(whole)),
			opt: Options{Depth: 1, Limits: Limits{Memory: 200 << 10}, Overlap: 16 << 10}, maxPart: 200 << 10, read: len(whole)},
		{name: "the expanded size still ends it", content: gz(t, []byte(whole)),
			opt: Options{Depth: 1, MaxEntryBytes: 64 << 10, Overlap: 8 << 10, Limits: Limits{Bytes: 300 << 10, Ratio: 1 << 20}}, maxPart: 64 << 10,
			read: -1, skips: []string{": expanded-size"}},
		{name: "parts under twice the overlap: skipped", content: gz(t, []byte(whole)),
			opt: Options{Depth: 1, MaxEntryBytes: 64 << 10, Overlap: 40 << 10}, skips: []string{": entry-size"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got strings.Builder
			var parts []Part
			var skips []string
			for _, s := range Walk(tc.content, tc.opt, func(e Entry) {
				if e.Part == nil || e.Path != tc.path {
					return
				}
				p := *e.Part
				if len(e.Content) > tc.maxPart {
					t.Errorf("part at %d: %d bytes, over %d", p.Offset, len(e.Content), tc.maxPart)
				}
				if want := whole[p.Offset : p.Offset+int64(len(e.Content))]; string(e.Content) != want {
					t.Fatalf("part at %d is not the file's bytes there", p.Offset)
				}
				before := whole[:p.Offset]
				if lines, col := int64(strings.Count(before, "\n")), p.Offset-int64(strings.LastIndexByte(before, '\n')+1); p.Lines != lines || p.Column != col {
					t.Errorf("part at %d: lines %d column %d, want %d %d", p.Offset, p.Lines, p.Column, lines, col)
				}
				if int64(got.Len()) != p.Offset+int64(p.From) {
					t.Fatalf("part at %d keeps from %d, the parts before kept up to %d", p.Offset, p.Offset+int64(p.From), got.Len())
				}
				got.Write(e.Content[p.From:p.To])
				parts = append(parts, p)
			}) {
				skips = append(skips, s.Path+": "+string(s.Reason))
			}
			if !slices.Equal(skips, tc.skips) {
				t.Errorf("skips %q, want %q", skips, tc.skips)
			}
			switch {
			case tc.read == 0 && len(parts) > 0:
				t.Errorf("%d parts, want none", len(parts))
			case tc.read > 0 && (got.String() != whole[:tc.read] || len(parts) < 2 || !parts[len(parts)-1].Last):
				t.Errorf("the kept ranges of %d parts make %d bytes, want the file's %d, the last part last", len(parts), got.Len(), tc.read)
			case tc.read < 0 && (len(parts) < 2 || parts[len(parts)-1].Last):
				t.Errorf("%d parts, the last one last: want the walk cut short", len(parts))
			}
		})
	}
}
