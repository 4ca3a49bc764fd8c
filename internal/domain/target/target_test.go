package target

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const (
	c1 = "0123456789abcdef0123456789abcdef01234567"
	c2 = "89abcdef0123456789abcdef0123456789abcdef"
)

func TestNormalizeIdenticalRequestsGiveIdenticalTargets(t *testing.T) {
	a := []Request{
		{Location: "https://GitHub.com/Acme/App.git/", Refs: []string{"main", "dev", "main"}},
		{Location: "./repo/../repo", Commits: []string{strings.ToUpper(c2), c1}},
		{Location: "https://user:token@github.com/acme/lib"},
	}
	b := []Request{
		{Location: "https://github.com/acme/lib"},
		{Location: "https://github.com/Acme/App", Refs: []string{"dev", "main"}},
		{Location: "repo", Commits: []string{c1, c2, c1}},
		{Location: "https://github.com/acme/lib.git"},
	}
	na, err := Normalize(a)
	if err != nil {
		t.Fatal(err)
	}
	nb, err := Normalize(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(na.Targets, nb.Targets) {
		t.Fatalf("identical requests normalized differently:\n%+v\n%+v", na.Targets, nb.Targets)
	}
	for i := range na.Targets {
		if na.Targets[i].Key() != nb.Targets[i].Key() {
			t.Errorf("target %d keys differ", i)
		}
	}
	abs, _ := filepath.Abs("repo")
	want := []Target{
		{Location: abs, Local: true, Selection: Selection{Commits: []string{c1, c2}}},
		{Location: "https://github.com/Acme/App", Selection: Selection{Refs: []string{"dev", "main"}}},
		{Location: "https://github.com/acme/lib"},
	}
	if !reflect.DeepEqual(na.Targets, want) {
		t.Fatalf("targets = %+v\nwant     %+v", na.Targets, want)
	}
	if !na.StrippedCredentials || nb.StrippedCredentials {
		t.Errorf("StrippedCredentials = %v, %v", na.StrippedCredentials, nb.StrippedCredentials)
	}
	for _, tg := range na.Targets {
		if strings.Contains(tg.Location, "token") {
			t.Errorf("credentials kept in %s", tg.Location)
		}
	}
}

func TestKeysDistinguishSelections(t *testing.T) {
	base := Target{Location: "https://h/o/r"}
	keys := map[string]bool{}
	for _, tg := range []Target{base,
		{Location: "https://h/o/r", Selection: Selection{Refs: []string{"main"}}},
		{Location: "https://h/o/r", Selection: Selection{Commits: []string{c1}}},
		{Location: "https://h/o/r2"},
		{Location: "/h/o/r", Local: true},
	} {
		keys[tg.Key()] = true
	}
	if len(keys) != 5 {
		t.Fatalf("%d distinct keys for 5 distinct targets", len(keys))
	}
}

func TestNormalizeRejects(t *testing.T) {
	tests := []struct {
		name string
		reqs []Request
		want string
	}{
		{"conflicting selections", []Request{{Location: "https://h/o/r", Refs: []string{"main"}}, {Location: "https://h/o/r.git"}}, "different selections"},
		{"short commit", []Request{{Location: "https://h/o/r", Commits: []string{"abc123"}}}, "full commit id"},
		{"non-hex commit", []Request{{Location: "https://h/o/r", Commits: []string{strings.Repeat("g", 40)}}}, "full commit id"},
		{"bad ref", []Request{{Location: "https://h/o/r", Refs: []string{"a..b"}}}, "bad ref"},
		{"ref with space", []Request{{Location: "https://h/o/r", Refs: []string{"my branch"}}}, "bad ref"},
		{"synthetic ref", []Request{{Location: "https://h/o/r", Refs: []string{SyntheticRef(c1)}}}, "gitfleet's own"},
		{"ssh scheme", []Request{{Location: "ssh://git@h/o/r"}}, "scheme"},
		{"query", []Request{{Location: "https://h/o/r?x=1"}}, "query"},
		{"path trick", []Request{{Location: "https://h/o/../r"}}, "not a repository path"},
		{"no path", []Request{{Location: "https://h/"}}, "not a repository path"},
		{"empty", []Request{{Location: " "}}, "empty"},
		{"newline in a path", []Request{{Location: "/tmp/a\nb"}}, "control character"},
		{"trailing newline", []Request{{Location: "/tmp/repo\n"}}, "control character"},
		{"escape in a URL", []Request{{Location: "https://h/o/r\x1b[31m"}}, "control character"},
		{"an encoded newline in a URL", []Request{{Location: "https://h/o/r%0a"}}, "control character"},
		{"an encoded escape in a URL", []Request{{Location: "https://h/o%1b[31m/r"}}, "control character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Normalize(tt.reqs)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Normalize() error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestSyntheticRefIsStable(t *testing.T) {
	if SyntheticRef(strings.ToUpper(c1)) != SyntheticRef(c1) || SyntheticRef(c1) != SyntheticRefPrefix+c1 {
		t.Fatalf("SyntheticRef = %s", SyntheticRef(c1))
	}
}
