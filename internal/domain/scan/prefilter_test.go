package scan

import (
	"regexp"
	"strings"
	"testing"
)

// gitleaksPaths are gitleaks v8.30.1's global allowlist paths, joined as
// gitleaks joins them (a leading (?i) applies to the patterns after it).
var gitleaksPaths = []string{`gitleaks\.toml`, `(?i)\.(?:bmp|gif|jpe?g|png|svg|tiff?)$`, `(?i)\.(?:eot|[ot]tf|woff2?)$`,
	`(?i)\.(?:docx?|xlsx?|pdf|bin|socket|vsidx|v2|suo|wsuo|.dll|pdb|exe|gltf)$`, `go\.(?:mod|sum|work(?:\.sum)?)$`,
	`(?:^|/)vendor/modules\.txt$`, `(?:^|/)vendor/(?:github\.com|golang\.org/x|google\.golang\.org|gopkg\.in|istio\.io|k8s\.io|sigs\.k8s\.io)(?:/.*)?$`,
	`(?:^|/)gradlew(?:\.bat)?$`, `(?:^|/)gradle\.lockfile$`, `(?:^|/)mvnw(?:\.cmd)?$`, `(?:^|/)\.mvn/wrapper/MavenWrapperDownloader\.java$`,
	`(?:^|/)node_modules(?:/.*)?$`, `(?:^|/)(?:deno\.lock|npm-shrinkwrap\.json|package-lock\.json|pnpm-lock\.yaml|yarn\.lock)$`,
	`(?:^|/)bower_components(?:/.*)?$`, `(?:^|/)(?:angular|bootstrap|jquery(?:-?ui)?|plotly|swagger-?ui)[a-zA-Z0-9.-]*(?:\.min)?\.js(?:\.map)?$`,
	`(?:^|/)javascript\.json$`, `(?:^|/)(?:Pipfile|poetry)\.lock$`, `(?i)(?:^|/)(?:v?env|virtualenv)/lib(?:64)?(?:/.*)?$`,
	`(?i)(?:^|/)(?:lib(?:64)?/python[23](?:\.\d{1,2})+|python/[23](?:\.\d{1,2})+/lib(?:64)?)(?:/.*)?$`,
	`(?i)(?:^|/)[a-z0-9_.]+-[0-9.]+\.dist-info(?:/.+)?$`, `(?:^|/)vendor/(?:bundle|ruby)(?:/.*?)?$`, `\.gem$`,
	`verification-metadata\.xml`, `Database.refactorlog`, `(?:^|/)\.git$`}

var testPaths = []string{
	"", "a", "internal/tree/runtime/delay_123.go", "docs/widget/model/height_7.yaml", "cmd/main.go",
	"gitleaks.toml", "GITLEAKS.TOML", "img/Logo.PNG", "fonts/x.woff2", "a/b.DLL", "b/cdll", "go.mod", "x/go.work.sum", "GO.MOD",
	"vendor/modules.txt", "src/vendor/github.com/x/y.go", "gradlew.bat", "sub/gradle.lockfile", "mvnw.cmd",
	".mvn/wrapper/MavenWrapperDownloader.java", "web/node_modules/x/index.js", "NODE_MODULES/x", "yarn.lock", "app/package-lock.json",
	"static/jquery-ui-1.12.min.js", "static/Swagger-UI.js", "Pipfile.lock", "VENV/lib64/site.py", "x/lib/python3.11/site.py",
	"requests-2.31.0.dist-info/METADATA", "vendor/ruby/x", "a.gem", "conf/verification-metadata.xml", "DatabaseXrefactorlog",
	"repo/.git", "repo/.github/x", "\u212Aey.PNG", "ſecret.toml", "docs/\u212A.svg", "\u017Fub/venv/lib/x", "VIRTUALENV/LIB/x",
}

// The prefilter never rejects a path its regex matches, on gitleaks'
// allowlist and on patterns with folding, alternations, repeats and
// classes; and it does reject the usual paths for gitleaks' allowlist.
func TestPathMatcherAgreesWithItsRegex(t *testing.T) {
	patterns := []string{
		"(?:" + strings.Join(gitleaksPaths, "|") + ")",
		`(?i)key`, `(?i)\x{212A}ey`, `(?i)(?:secret|token)s?\.ya?ml$`, `^(?:a|b)+c{2,}$`, `x*y?z`, `[ab]cd`, `(?i)s`, `(?i)ſ`,
		`(abc){0,2}def`, `(?:abc|)def`, `\.p(?:12|fx)$`, `(?i)(?:^|/)id_[rd]sa$`, `Äpfel`, `(?i:ab)Ä`, `(?i)äb`,
		`x(?:ab|c.d|)y`, `(?:a|b)(?:c|d)(?:e|f)`, `pre(?:fix|(?i)FOLD)post`, `\.(?:(?:a|.b)$|cd)`,
	}
	for _, p := range patterns {
		re := regexp.MustCompile(p)
		m := newFilteredRegex(re)
		for _, path := range append(testPaths, "key.txt", "Kelvin", "secrets.yml", "abbcc", "ab", "zz", "acd", "xdef", "abcabcdef",
			"a.p12", "x/ID_RSA", "\u212Aey", "ſ", "S", "Äpfel.txt", "äpfel", "abÄ", "ABÄ", "ÄB", "äB",
			"xaby", "xy", "xcZdy", "bdf", "acf", "prefixpost", "prefoldpost", "preFOLDpost", "x.a", "x.Zb", "x.cd", "x.b") {
			if got, want := m.MatchString(path), re.MatchString(path); got != want {
				t.Errorf("%q on %q: %t, the regex says %t ", p, path, got, want)
			}
		}
	}
	m := newFilteredRegex(regexp.MustCompile("(?:" + strings.Join(gitleaksPaths, "|") + ")"))
	if m.lits == nil {
		t.Fatal("no prefilter for gitleaks' allowlist")
	}
	for _, path := range []string{"internal/tree/runtime/delay_123.go", "cmd/server/main.go", "pkg/api/handler_test.go"} {
		if mayMatch(m, path) {
			t.Errorf("%q passes the prefilter", path)
		}
	}
}

func FuzzFilteredRegex(f *testing.F) {
	for _, p := range gitleaksPaths {
		f.Add(p, "vendor/github.com/x")
	}
	f.Add(`(?i)\x{212A}`, "k")
	f.Fuzz(func(t *testing.T, pattern, path string) {
		re, err := regexp.Compile(pattern)
		if err != nil {
			return
		}
		m := newFilteredRegex(re)
		if got, want := m.MatchString(path), re.MatchString(path); got != want {
			t.Fatalf("%q on %q: %t, the regex says %t", pattern, path, got, want)
		}
		if got, want := m.Match([]byte(path)), re.MatchString(path); got != want {
			t.Fatalf("%q on []byte %q: %t, the regex says %t", pattern, path, got, want)
		}
	})
}
