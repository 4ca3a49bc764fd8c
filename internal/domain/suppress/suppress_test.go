package suppress

import "testing"

func TestParseIgnoreAndMatch(t *testing.T) {
	const file = "# a comment\n\n  abc123:config\\app.env:github-pat:3  \r\nsrc\\main.go:generic-api-key:10\nnot a fingerprint\n#abc:x:y:1\n"
	ig, invalid := ParseIgnore([]byte(file))
	if invalid != 1 {
		t.Errorf("invalid = %d, want 1", invalid)
	}
	for _, tt := range []struct {
		commit, file, rule string
		line               int
		want               bool
	}{
		{"abc123", "config/app.env", "github-pat", 3, true},
		{"abc124", "config/app.env", "github-pat", 3, false}, // another commit
		{"abc123", "config/app.env", "github-pat", 4, false}, // another line
		{"abc123", "config/app.env", "aws-access-token", 3, false},
		{"", "config/app.env", "github-pat", 3, false}, // the commit form needs the commit
		{"", "src/main.go", "generic-api-key", 10, true},
		{"any", "src/main.go", "generic-api-key", 10, true}, // the global form in any commit
		{"abc", "x", "y", 1, false},                         // commented out
	} {
		if got := ig.Match(tt.commit, tt.file, tt.rule, tt.line); got != tt.want {
			t.Errorf("Match(%q, %q, %q, %d) = %t, want %t", tt.commit, tt.file, tt.rule, tt.line, got, tt.want)
		}
	}
	if _, ok := ig["not a fingerprint"]; !ok {
		t.Error("a line of another shape is kept, as gitleaks keeps it")
	}
}

func TestInlineAllowed(t *testing.T) {
	const secret = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	for _, tt := range []struct {
		name, content string
		want          bool
	}{
		{"on the line", "a\ntoken = \"" + secret + "\" # gitleaks:allow\nb\n", true},
		{"before it on the line", "// gitleaks:allow\nx := 1; /* gitleaks:allow */ t := \"" + secret + "\"\n", true},
		{"the line above", "// gitleaks:allow\nt := \"" + secret + "\"\n", false},
		{"the line below", "t := \"" + secret + "\"\n// gitleaks:allow\n", false},
		{"last line, no newline", "t := " + secret + " # gitleaks:allow", true},
		{"CRLF", "t := " + secret + " # gitleaks:allow\r\nnext\r\n", true},
		{"none", "t := " + secret + "\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := indexOf(tt.content, secret)
			if got := InlineAllowed([]byte(tt.content), start, start+len(secret)); got != tt.want {
				t.Errorf("InlineAllowed = %t, want %t", got, tt.want)
			}
		})
	}
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
