package notify

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseTargets(t *testing.T) {
	tests := []struct {
		name    string
		setting string
		want    []Target
		wantErr string
	}{
		{"unset", "", nil, ""},
		{"generic", "https://alerts.example/hook", []Target{{"https://alerts.example/hook", FormatJSON}}, ""},
		{"slack by host", "https://hooks.slack.com/services/T0/B0/tok", []Target{{"https://hooks.slack.com/services/T0/B0/tok", FormatSlack}}, ""},
		{"slack by prefix", "slack+http://127.0.0.1:9/services/x", []Target{{"http://127.0.0.1:9/services/x", FormatSlack}}, ""},
		{"several, spaces, duplicates", " https://a.example/1 ,slack+https://b.example/2,, https://a.example/1",
			[]Target{{"https://a.example/1", FormatJSON}, {"https://b.example/2", FormatSlack}}, ""},
		{"not http", "https://a.example/1,ftp://secret-token@b.example/", nil, "URL 2 is not an http(s) URL"},
		{"no host", "https://", nil, "URL 1 is not"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTargets(tt.setting)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "secret-token") {
					t.Fatalf("error %v, want %q without the URL", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(got) != len(tt.want) {
				t.Fatalf("%+v, %v; want %+v", got, err, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("target %d: %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	base := Fingerprint("github-pat", "h1", "codebase:1", "")
	tests := []struct {
		name                       string
		rule, hash, subject, spath string
		same                       bool
	}{
		{"the same secret in another repository", "github-pat", "h1", "codebase:2", "", true},
		{"another secret", "github-pat", "h2", "codebase:1", "", false},
		{"another rule", "gitlab-pat", "h1", "codebase:1", "", false},
		{"a path-only secret of another repository", "pkcs12-file", "", "codebase:2", "certs/a.p12", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Fingerprint(tt.rule, tt.hash, tt.subject, tt.spath); (got == base) != tt.same {
				t.Errorf("%s vs %s: same=%t, want %t", got, base, got == base, tt.same)
			}
		})
	}
	if Fingerprint("pkcs12-file", "", "codebase:1", "a.p12") == Fingerprint("pkcs12-file", "", "codebase:2", "a.p12") {
		t.Error("a path-only rule's file is deduplicated across repositories")
	}
}

func TestBuildAndBody(t *testing.T) {
	alert := func(i int) Alert {
		return Alert{Rule: "github-pat", Path: "conf/<a>.env", Line: i + 1, Commit: "0123456789abcdef0123", Preview: "ghp_…XYZ",
			Validity: "unchecked", Link: "https://forge.example/o/r/blob/0123/conf/a.env", Fingerprint: "fp"}
	}
	many := func(n int) []Alert {
		var out []Alert
		for i := range n {
			out = append(out, alert(i))
		}
		return out
	}
	tests := []struct {
		name                  string
		kind                  Kind
		alerts                []Alert
		wantOK                bool
		listed, total, blocks int
		summary, more         string
	}{
		{"none", KindNew, nil, false, 0, 0, 0, "", ""},
		{"one new", KindNew, many(1), true, 1, 1, 2, "1 secret new to the fleet in forge.example/o/r", ""},
		{"valid", KindValid, many(2), true, 2, 2, 3, "2 secrets in forge.example/o/r found valid", ""},
		{"many: one message, the rest counted", KindNew, many(MaxListed + 5), true, MaxListed, MaxListed + 5, MaxListed + 2,
			"45 secrets new", "and 5 more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := Build("msg-1", tt.kind, "forge.example/o/r", "https://forge.example/o/r", tt.alerts)
			if ok != tt.wantOK {
				t.Fatalf("ok %t", ok)
			}
			if !ok {
				return
			}
			if len(m.Alerts) != tt.listed || m.Total != tt.total || !strings.Contains(m.Summary, tt.summary) {
				t.Errorf("listed %d of %d, %q; want %d of %d, %q", len(m.Alerts), m.Total, m.Summary, tt.listed, tt.total, tt.summary)
			}
			generic, err := m.Body(FormatJSON)
			if err != nil {
				t.Fatal(err)
			}
			var back Message
			if err := json.Unmarshal(generic, &back); err != nil || back.ID != "msg-1" || back.Kind != tt.kind || len(back.Alerts) != tt.listed ||
				back.Alerts[0].Preview != "ghp_…XYZ" || back.Alerts[0].Commit == "" || back.Alerts[0].Validity != "unchecked" {
				t.Errorf("generic body %s: %+v, %v", generic, back, err)
			}
			if strings.Contains(string(generic), `"fp"`) {
				t.Error("the generic body carries the fingerprint")
			}
			slack, err := m.Body(FormatSlack)
			if err != nil {
				t.Fatal(err)
			}
			var s struct {
				Text   string `json:"text"`
				Blocks []struct {
					Type string                `json:"type"`
					Text struct{ Text string } `json:"text"`
				} `json:"blocks"`
			}
			if err := json.Unmarshal(slack, &s); err != nil || s.Text != m.Summary || len(s.Blocks) != tt.blocks {
				t.Fatalf("slack body %s: %v; want %d blocks", slack, err, tt.blocks)
			}
			if !strings.Contains(s.Blocks[1].Text.Text, "conf/&lt;a&gt;.env:1") || !strings.Contains(s.Blocks[1].Text.Text, "<https://forge.example") {
				t.Errorf("slack alert block %q", s.Blocks[1].Text.Text)
			}
			if tt.more != "" && !strings.Contains(s.Blocks[len(s.Blocks)-1].Text.Text, tt.more) {
				t.Errorf("slack last block %q, want %q", s.Blocks[len(s.Blocks)-1].Text.Text, tt.more)
			}
		})
	}
}

func TestBlobLink(t *testing.T) {
	tests := []struct {
		name, repo   string
		collected    bool
		commit, path string
		line         int
		want         string
	}{
		{"collected", "github.com/o/r", true, "abc", "conf/a b.env", 3, "https://github.com/o/r/blob/abc/conf/a%20b.env#L3"},
		{"no line", "github.com/o/r", true, "abc", "a.env", 0, "https://github.com/o/r/blob/abc/a.env"},
		{"scan target", "/srv/repo.git", false, "abc", "a.env", 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := BlobLink(tt.repo, tt.collected, tt.commit, tt.path, tt.line); got != tt.want {
				t.Errorf("%q, want %q", got, tt.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		status int
		want   Outcome
	}{{200, Delivered}, {204, Delivered}, {301, Refused}, {400, Refused}, {404, Refused}, {410, Refused},
		{408, Retry}, {429, Retry}, {500, Retry}, {503, Retry}} {
		if got := Classify(tt.status); got != tt.want {
			t.Errorf("%d: %d, want %d", tt.status, got, tt.want)
		}
	}
}

func TestWait(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	tests := []struct {
		name      string
		sent      []time.Time
		perMinute int
		want      time.Duration
	}{
		{"nothing sent", nil, 2, 0},
		{"below the bound", []time.Time{ago(10 * time.Second)}, 2, 0},
		{"at the bound: until the oldest leaves", []time.Time{ago(10 * time.Second), ago(50 * time.Second)}, 2, 10 * time.Second},
		{"older sends do not count", []time.Time{ago(2 * time.Minute), ago(61 * time.Second), ago(5 * time.Second)}, 2, 0},
		{"over the bound (racing workers)", []time.Time{ago(1 * time.Second), ago(20 * time.Second), ago(40 * time.Second)}, 2, 40 * time.Second},
		{"no bound", []time.Time{ago(time.Second), ago(time.Second)}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Wait(tt.sent, now, tt.perMinute); got != tt.want {
				t.Errorf("%v, want %v", got, tt.want)
			}
		})
	}
}
