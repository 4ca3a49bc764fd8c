package ghaccount

import (
	"testing"
	"time"
)

func TestMergeDeduplicatesAndSorts(t *testing.T) {
	a := []Repo{{ID: 3, Owner: "zed", Name: "x"}, {ID: 1, Owner: "Acme", Name: "b"}}
	b := []Repo{{ID: 1, Owner: "Acme", Name: "b", Archived: true}, {ID: 2, Owner: "acme", Name: "A"}}
	got := Merge(a, b)
	want := []int64{2, 1, 3}
	if len(got) != len(want) {
		t.Fatalf("merged %d repositories, want %d", len(got), len(want))
	}
	for i, id := range want {
		if got[i].ID != id {
			t.Fatalf("order = %v, want ids %v", got, want)
		}
	}
	if got[1].Archived {
		t.Error("the first list's copy of a repository must win")
	}
}

func TestFilter(t *testing.T) {
	live := Repo{Owner: "Acme", Name: "a"}
	archived := Repo{Owner: "acme", Name: "b", Archived: true}
	other := Repo{Owner: "bob", Name: "c"}
	for _, tc := range []struct {
		f    Filter
		r    Repo
		want bool
	}{
		{Filter{}, live, true},
		{Filter{}, archived, false},
		{Filter{IncludeArchived: true}, archived, true},
		{Filter{Org: "ACME"}, live, true},
		{Filter{Org: "acme"}, other, false},
		{Filter{Org: "acme", IncludeArchived: true}, archived, true},
	} {
		if got := tc.f.Match(tc.r); got != tc.want {
			t.Errorf("%+v.Match(%s) = %t, want %t", tc.f, tc.r.FullName(), got, tc.want)
		}
	}
}

func TestAge(t *testing.T) {
	now := time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		ago  time.Duration
		want string
	}{
		{10 * time.Second, "cached just now"},
		{5 * time.Minute, "cached 5m ago"},
		{3*time.Hour + 59*time.Minute, "cached 3h ago"},
		{72 * time.Hour, "cached 3d ago"},
	} {
		if got := Age(now.Add(-tc.ago), now); got != tc.want {
			t.Errorf("Age(%s ago) = %q, want %q", tc.ago, got, tc.want)
		}
	}
	if got := Age(time.Time{}, now); got != "never fetched" {
		t.Errorf("Age(zero) = %q", got)
	}
}

func TestOrgList(t *testing.T) {
	if l := OrgList("Acme"); l != "org:acme" || OrgOfList(l) != "acme" || OrgOfList(ListRepos) != "" {
		t.Fatalf("OrgList/OrgOfList round trip: %q", l)
	}
}
