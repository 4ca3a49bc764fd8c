package repogen

import (
	"math/rand/v2"
	"strconv"
)

// The vocabulary is deliberately neutral: none of the words a secret
// scanner's keyword prefilter looks for (key, token, secret, password, auth,
// credential, access, private, api, ...) so that the planted secrets are the
// only content that should reach a scanner's rules.
var words = []string{
	"widget", "order", "item", "count", "cache", "store", "buffer", "index",
	"node", "tree", "layer", "shard", "queue", "event", "record", "entry",
	"batch", "stream", "reader", "writer", "parser", "router", "handler",
	"worker", "pool", "client", "server", "request", "response", "config",
	"option", "limit", "offset", "cursor", "page", "region", "zone", "cluster",
	"metric", "gauge", "counter", "timer", "window", "frame", "block", "chunk",
	"segment", "vector", "matrix", "graph", "edge", "vertex", "route", "filter",
	"mapper", "reducer", "merge", "split", "join", "sort", "value", "field",
	"column", "row", "table", "schema", "view", "model", "state", "status",
	"phase", "stage", "step", "task", "job", "plan", "build", "deploy",
	"release", "version", "update", "insert", "select", "query", "result",
	"retry", "backoff", "delay", "interval", "period", "scale", "ratio",
	"weight", "score", "rank", "level", "depth", "width", "height", "color",
	"shape", "point", "line", "circle", "label", "title", "name", "owner",
	"group", "member", "report", "summary", "detail", "invoice", "ledger",
	"balance", "carrier", "parcel", "route", "sensor", "signal", "sample",
}

var goTypes = []string{"int", "string", "bool", "float64", "[]byte", "error", "*Context", "Options", "uint32", "time.Duration"}

var topDirs = []string{"cmd", "internal", "pkg", "lib", "web", "tools", "config", "docs"}
var subDirs = []string{"core", "util", "model", "store", "service", "transport", "runtime", "testdata"}

// extension kinds
const (
	kindGo = iota
	kindPy
	kindYAML
	kindMD
)

var kindExt = []string{".go", ".py", ".yaml", ".md"}

// newRand returns a deterministic generator for the given stream of numbers.
func newRand(seed int64, a, b, c uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed)^(a*0x9E3779B97F4A7C15), b*0xBF58476D1CE4E5B9^c*0x94D049BB133111EB^0x5851F42D4C957F2D))
}

// pathFor returns the k-th generated path (unique by construction: k is part
// of the file name) and its content kind.
func pathFor(seed int64, k int) (string, int) {
	r := newRand(seed, 1, uint64(k), 0)
	kind := kindMD
	switch x := r.IntN(20); {
	case x < 12:
		kind = kindGo
	case x < 16:
		kind = kindPy
	case x < 19:
		kind = kindYAML
	}
	b := make([]byte, 0, 64)
	// top/module[/sub]/file: 8 top directories of 24 modules each, three
	// files in four in one of 8 subdirectories; about a dozen files a
	// directory per 2,000 paths.
	b = append(b, topDirs[r.IntN(len(topDirs))]...)
	b = append(b, '/')
	b = append(b, words[r.IntN(24)]...)
	if r.IntN(4) != 0 {
		b = append(b, '/')
		b = append(b, subDirs[r.IntN(len(subDirs))]...)
	}
	b = append(b, '/')
	b = append(b, words[r.IntN(len(words))]...)
	b = append(b, '_')
	b = strconv.AppendInt(b, int64(k), 10)
	b = append(b, kindExt[kind]...)
	return string(b), kind
}

// fileSize is the target size of the k-th path's content.
func fileSize(seed int64, k, blobSize int) int {
	r := newRand(seed, 2, uint64(k), 0)
	return blobSize/2 + r.IntN(blobSize+1)
}

// appendContent appends the text of version v of path (the k-th path) to dst.
// Every version starts with a header naming the path and version, so every
// (path, version) pair is a distinct blob; the other lines are the path's
// base lines with a few of them replaced per version, like real edits (and
// delta-friendly in the pack).
func appendContent(dst []byte, seed int64, k int, path string, kind, v, size int) []byte {
	start := len(dst)
	switch kind {
	case kindGo:
		dst = append(dst, "// "...)
	case kindMD:
		dst = append(dst, "<!-- "...)
	default:
		dst = append(dst, "# "...)
	}
	dst = append(dst, path...)
	dst = append(dst, " revision "...)
	dst = strconv.AppendInt(dst, int64(v), 10)
	if kind == kindMD {
		dst = append(dst, " -->"...)
	}
	dst = append(dst, '\n')

	vr := newRand(seed, 3, uint64(k), uint64(v))
	// Lines changed in this version, as positions modulo a small period.
	var changed [3]int
	for i := range changed {
		changed[i] = vr.IntN(64)
	}
	base := newRand(seed, 4, uint64(k), 0)
	var scratch []byte
	for line := 0; len(dst)-start < size; line++ {
		r := base
		edited := v > 0 && (line%64 == changed[0] || line%64 == changed[1] || line%64 == changed[2])
		if edited {
			r = vr
		}
		dst = appendLine(dst, r, kind, line)
		if edited {
			// Keep the base generator in step with unedited versions.
			scratch = appendLine(scratch[:0], base, kind, line)
		}
	}
	return dst
}

func word(r *rand.Rand) string { return words[r.IntN(len(words))] }

func appendCamel(dst []byte, r *rand.Rand, n int, upper bool) []byte {
	for i := 0; i < n; i++ {
		w := word(r)
		if i > 0 || upper {
			dst = append(dst, w[0]-'a'+'A')
			dst = append(dst, w[1:]...)
		} else {
			dst = append(dst, w...)
		}
	}
	return dst
}

func appendSnake(dst []byte, r *rand.Rand, n int) []byte {
	for i := 0; i < n; i++ {
		if i > 0 {
			dst = append(dst, '_')
		}
		dst = append(dst, word(r)...)
	}
	return dst
}

func appendWords(dst []byte, r *rand.Rand, n int) []byte {
	for i := 0; i < n; i++ {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, word(r)...)
	}
	return dst
}

func appendNum(dst []byte, r *rand.Rand) []byte {
	return strconv.AppendInt(dst, int64(r.IntN(100000)), 10)
}

func appendLine(dst []byte, r *rand.Rand, kind, line int) []byte {
	switch kind {
	case kindGo:
		switch r.IntN(10) {
		case 0:
			dst = append(dst, "// "...)
			dst = appendWords(dst, r, 4+r.IntN(6))
			dst = append(dst, '.')
		case 1:
			dst = append(dst, "func "...)
			dst = appendCamel(dst, r, 2, r.IntN(2) == 0)
			dst = append(dst, '(')
			dst = appendCamel(dst, r, 1, false)
			dst = append(dst, ' ')
			dst = append(dst, goTypes[r.IntN(len(goTypes))]...)
			dst = append(dst, ") "...)
			dst = append(dst, goTypes[r.IntN(len(goTypes))]...)
			dst = append(dst, " {"...)
		case 2:
			dst = append(dst, "\tif "...)
			dst = appendCamel(dst, r, 2, false)
			dst = append(dst, " > "...)
			dst = appendNum(dst, r)
			dst = append(dst, " {\n\t\treturn "...)
			dst = appendCamel(dst, r, 1, false)
			dst = append(dst, "\n\t}"...)
		case 3:
			dst = append(dst, "\t"...)
			dst = appendCamel(dst, r, 1, false)
			dst = append(dst, '.')
			dst = appendCamel(dst, r, 2, true)
			dst = append(dst, "(\""...)
			dst = appendWords(dst, r, 2)
			dst = append(dst, "\", "...)
			dst = appendNum(dst, r)
			dst = append(dst, ')')
		case 4:
			dst = append(dst, "const "...)
			dst = appendCamel(dst, r, 2, true)
			dst = append(dst, " = "...)
			dst = appendNum(dst, r)
		case 5:
			dst = append(dst, "}\n"...)
		default:
			dst = append(dst, '\t')
			dst = appendCamel(dst, r, 2, false)
			dst = append(dst, " := "...)
			dst = appendCamel(dst, r, 1, false)
			dst = append(dst, " + "...)
			dst = appendNum(dst, r)
			dst = append(dst, " * "...)
			dst = appendCamel(dst, r, 1, false)
		}
	case kindPy:
		switch r.IntN(8) {
		case 0:
			dst = append(dst, "# "...)
			dst = appendWords(dst, r, 4+r.IntN(6))
		case 1:
			dst = append(dst, "\ndef "...)
			dst = appendSnake(dst, r, 2)
			dst = append(dst, '(')
			dst = appendSnake(dst, r, 1)
			dst = append(dst, ", "...)
			dst = appendSnake(dst, r, 1)
			dst = append(dst, "=None):"...)
		case 2:
			dst = append(dst, "class "...)
			dst = appendCamel(dst, r, 2, true)
			dst = append(dst, ':')
		case 3:
			dst = append(dst, "    return "...)
			dst = appendSnake(dst, r, 2)
		default:
			dst = append(dst, "    "...)
			dst = appendSnake(dst, r, 2)
			dst = append(dst, " = "...)
			dst = appendSnake(dst, r, 1)
			dst = append(dst, '.')
			dst = appendSnake(dst, r, 2)
			dst = append(dst, '(')
			dst = appendNum(dst, r)
			dst = append(dst, ')')
		}
	case kindYAML:
		switch r.IntN(6) {
		case 0:
			dst = append(dst, "# "...)
			dst = appendWords(dst, r, 3+r.IntN(5))
		case 1:
			dst = appendSnake(dst, r, 1)
			dst = append(dst, ':')
		case 2:
			dst = append(dst, "  "...)
			dst = appendSnake(dst, r, 2)
			dst = append(dst, ": \""...)
			dst = appendWords(dst, r, 2)
			dst = append(dst, '"')
		case 3:
			dst = append(dst, "  enabled: "...)
			if r.IntN(2) == 0 {
				dst = append(dst, "true"...)
			} else {
				dst = append(dst, "false"...)
			}
		default:
			dst = append(dst, "  "...)
			dst = appendSnake(dst, r, 2)
			dst = append(dst, ": "...)
			dst = appendNum(dst, r)
		}
	default: // markdown
		if line%12 == 0 {
			dst = append(dst, "\n## "...)
			dst = appendWords(dst, r, 2+r.IntN(3))
			dst = append(dst, '\n')
		} else {
			w := word(r)
			dst = append(dst, w[0]-'a'+'A')
			dst = append(dst, w[1:]...)
			dst = append(dst, ' ')
			dst = appendWords(dst, r, 6+r.IntN(8))
			dst = append(dst, '.')
		}
	}
	return append(dst, '\n')
}

// appendBinary appends n pseudo-random bytes, roughly one in eight a NUL.
func appendBinary(dst []byte, r *rand.Rand, n int) []byte {
	for i := 0; i < n; i++ {
		x := r.Uint32()
		if x&7 == 0 {
			dst = append(dst, 0)
		} else {
			dst = append(dst, byte(x>>8))
		}
	}
	return dst
}
