package repoid

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    ID
		wantErr string // substring; "" = success
	}{
		{in: "github.com/octocat/Hello-World", want: ID{"github.com", "octocat", "Hello-World"}},
		{in: "GitHub.com/octocat/hello.git", want: ID{"github.com", "octocat", "hello"}},
		{in: "octocat/hello", want: ID{"ghe.example.com", "octocat", "hello"}},
		{in: "https://github.com/octocat/hello.git", want: ID{"github.com", "octocat", "hello"}},
		{in: "https://github.com/octocat/hello/", want: ID{"github.com", "octocat", "hello"}},
		{in: "http://127.0.0.1:8080/acme/app", want: ID{"127.0.0.1:8080", "acme", "app"}},
		{in: "  ghe.example.com/org_emu/x_y.z-1  ", want: ID{"ghe.example.com", "org_emu", "x_y.z-1"}},
		{in: "", wantErr: "empty"},
		{in: "github.com/octocat", wantErr: "repository name is missing"},
		{in: "a/b/c/d", wantErr: "not host/owner/name"},
		{in: "github.com/../etc", wantErr: "path trick"},
		{in: "github.com/octocat/..", wantErr: "path trick"},
		{in: "github.com/octo cat/x", wantErr: "contains"},
		{in: "github.com/-octo/x", wantErr: "hyphens"},
		{in: "github.com/octo--cat/x", wantErr: "hyphens"},
		{in: "github.com/" + strings.Repeat("a", 40) + "/x", wantErr: "limit 39"},
		{in: "github.com/a/" + strings.Repeat("b", 101), wantErr: "limit 100"},
		{in: "bad_host!/a/b", wantErr: "not a valid host"},
		{in: "host:99999x/a/b", wantErr: "bad port"},
		{in: "https://user:s3cr3t@github.com/a/b", wantErr: "credentials"},
		{in: "https://s3cr3t@github.com/a/b", wantErr: "credentials"},
		{in: "git@github.com:a/b.git", wantErr: "SSH"},
		{in: "ftp://github.com/a/b", wantErr: "scheme"},
		{in: "https://github.com/a/b?x=1", wantErr: "query"},
		{in: "https://github.com/a/%2e%2e", wantErr: "percent"},
		{in: "https://github.com/a/b/c", wantErr: "/owner/name"},
		{in: "github.com/a/b\x00", wantErr: "control"},
		{in: strings.Repeat("x", 3000), wantErr: "limit 2048"},
		{in: "owner/name-without-default", wantErr: ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			def := "ghe.example.com"
			if tt.in == "owner/name-without-default" {
				def = ""
				tt.wantErr = "no host"
			}
			got, err := Parse(tt.in, def)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("Parse(%q) = %+v, want error containing %q", tt.in, got, tt.wantErr)
				}
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("error %v does not wrap ErrInvalid", err)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q does not mention %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "s3cr3t") {
					t.Errorf("error echoes a credential: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("Parse(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestKeyFoldsCase(t *testing.T) {
	a := ID{"github.com", "OctoCat", "Hello"}
	b := ID{"github.com", "octocat", "HELLO"}
	if !a.SameRepository(b) || a.Key() != "github.com/octocat/hello" {
		t.Fatalf("Key(%v)=%q Key(%v)=%q", a, a.Key(), b, b.Key())
	}
	if a.SameRepository(ID{"github.com", "octocat", "hello2"}) {
		t.Fatal("different names compare equal")
	}
}
