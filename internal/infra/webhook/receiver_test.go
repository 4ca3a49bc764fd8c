package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"

	"gitfleet/internal/domain/repoid"
)

type fakeStore struct {
	mu        sync.Mutex
	collected map[string]bool
	handled   map[string]bool
	noted     []string
}

func (s *fakeStore) Collected(_ context.Context, host, id string) (bool, error) {
	return host == "github.com" && s.collected[id], nil
}

func (s *fakeStore) AccountCollected(_ context.Context, host, account string) (bool, error) {
	return host == "github.com" && strings.EqualFold(account, "alice"), nil
}

func (s *fakeStore) DeliveryHandled(_ context.Context, guid string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handled[guid], nil
}

func (s *fakeStore) RecordDelivery(_ context.Context, guid, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handled[guid] = true
	return nil
}

func (s *fakeStore) NoteEvents(_ context.Context, _ string, ids []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noted = append(s.noted, ids...)
	return nil
}

type fakeDispatcher struct {
	fail      error
	collected []string
}

func (d *fakeDispatcher) Collect(_ context.Context, r repoid.ID, _ Delivery) error {
	if d.fail != nil {
		return d.fail
	}
	d.collected = append(d.collected, r.String())
	return nil
}

func (d *fakeDispatcher) Recollect(_ context.Context, account string, _ Delivery) error {
	if d.fail != nil {
		return d.fail
	}
	d.collected = append(d.collected, "account "+account)
	return nil
}

var secret = []byte("webhook secret")

// selection is an installation_repositories delivery adding n
// repositories of alice.
func selection(n int) string {
	added := make([]string, n)
	for i := range added {
		added[i] = fmt.Sprintf(`{"id":%d,"full_name":"alice/r%d"}`, 2000+i, i)
	}
	return `{"action":"added","installation":{"account":{"login":"alice"}},"repositories_added":[` + strings.Join(added, ",") + `]}`
}

const push = `{"ref":"refs/heads/main","after":"c2","repository":{"id":1001,"full_name":"alice/app"}}`

// Each delivery is answered as GitHub expects, and only a delivery signed
// with the secret, about a collected repository, not handled before,
// starts anything; a failed hand-off answers 503 and is not recorded, so
// its redelivery is handled.
func TestReceiver(t *testing.T) {
	for _, tc := range []struct {
		name       string
		event      string
		guid       string
		body       string
		signature  string // "" signs the body
		failing    bool
		wantStatus int
		wantRepos  []string
		recorded   bool
	}{
		{"a push", "push", "g1", push, "", false, 202, []string{"github.com/alice/app"}, true},
		{"a redelivery", "push", "seen", push, "", false, 200, nil, true},
		{"a forged signature", "push", "g2", push, "sha256=" + strings.Repeat("0", 64), false, 401, nil, false},
		{"no signature", "push", "g3", push, "-", false, 401, nil, false},
		{"signed with another secret", "push", "g4", push, Sign([]byte("other"), []byte(push)), false, 401, nil, false},
		{"too large", "push", "g5", strings.Repeat(" ", MaxBody+1), "", false, 413, nil, false},
		{"not collected", "push", "g6", `{"repository":{"id":7,"full_name":"bob/other"}}`, "", false, 202, nil, false},
		{"Temporal down", "push", "g7", push, "", true, 503, nil, false},
		{"an event not used", "issues", "g8", `{"action":"opened"}`, "", false, 202, nil, false},
		{"a rename", "repository", "g9", `{"action":"renamed","repository":{"id":1001,"full_name":"alice/app2"}}`, "", false, 202,
			[]string{"github.com/alice/app2"}, true},
		{"an edit", "repository", "g10", `{"action":"edited","repository":{"id":1001,"full_name":"alice/app"}}`, "", false, 202, nil, false},
		{"repositories added and removed", "installation_repositories", "g11",
			`{"action":"added","repositories_added":[{"id":1001,"full_name":"alice/app"},{"id":7,"full_name":"bob/other"}],"repositories_removed":[{"id":1002,"full_name":"alice/lib"}]}`,
			"", false, 202, []string{"github.com/alice/app", "github.com/alice/lib"}, true},
		{"a name with a path trick", "push", "g12", `{"repository":{"id":1001,"full_name":"alice/../../etc"}}`, "", false, 400, nil, false},
		{"not JSON", "push", "g13", `{"repository":`, "", false, 400, nil, false},
		{"no delivery id", "push", "", push, "", false, 400, nil, false},
		{"an installation deleted", "installation", "g14", `{"action":"deleted","installation":{"account":{"login":"Alice"}}}`, "", false, 202,
			[]string{"account Alice"}, true},
		{"an installation suspended", "installation", "g15", `{"action":"suspend","installation":{"account":{"login":"alice"}}}`, "", false, 202,
			[]string{"account alice"}, true},
		{"an installation of an account not collected", "installation", "g16", `{"action":"deleted","installation":{"account":{"login":"bob"}}}`, "", false, 202, nil, false},
		{"an installation's permissions accepted", "installation", "g17", `{"action":"new_permissions_accepted","installation":{"account":{"login":"alice"}}}`, "", false, 202, nil, false},
		{"an installation of no account", "installation", "g18", `{"action":"deleted","installation":{"account":{"login":"../x"}}}`, "", false, 400, nil, false},
		{"an installation, Temporal down", "installation", "g19", `{"action":"deleted","installation":{"account":{"login":"alice"}}}`, "", true, 503, nil, false},
		{"a selection of MaxNamed", "installation_repositories", "g20", selection(MaxNamed), "", false, 202, nil, false},
		{"a selection past MaxNamed", "installation_repositories", "g21", selection(MaxNamed + 1), "", false, 202, []string{"account alice"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &fakeStore{collected: map[string]bool{"1001": true, "1002": true}, handled: map[string]bool{"seen": true}}
			d := &fakeDispatcher{}
			if tc.failing {
				d.fail = errors.New("temporal: connection refused")
			}
			rc := &Receiver{Secret: secret, Host: "github.com", Store: st, Dispatcher: d, Log: zap.NewNop()}
			req := httptest.NewRequest(http.MethodPost, "/webhook", strings.NewReader(tc.body))
			switch tc.signature {
			case "":
				req.Header.Set("X-Hub-Signature-256", Sign(secret, []byte(tc.body)))
			case "-":
			default:
				req.Header.Set("X-Hub-Signature-256", tc.signature)
			}
			req.Header.Set("X-GitHub-Event", tc.event)
			req.Header.Set("X-GitHub-Delivery", tc.guid)
			rec := httptest.NewRecorder()
			rc.ServeHTTP(rec, req)
			if rec.Code != tc.wantStatus || strings.Join(d.collected, " ") != strings.Join(tc.wantRepos, " ") {
				t.Errorf("answered %d %q, collected %v; want %d, %v", rec.Code, rec.Body, d.collected, tc.wantStatus, tc.wantRepos)
			}
			if st.handled[tc.guid] != tc.recorded {
				t.Errorf("recorded %t, want %t", st.handled[tc.guid], tc.recorded)
			}
			wantNoted := len(tc.wantRepos)
			if wantNoted == 1 && strings.HasPrefix(tc.wantRepos[0], "account ") {
				wantNoted = 0 // a delivery about an account names no repository
			}
			if tc.guid != "seen" && len(st.noted) != wantNoted {
				t.Errorf("noted events of %v, want one for each of %v", st.noted, tc.wantRepos)
			}
		})
	}
}
