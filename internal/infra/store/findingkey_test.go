package store_test

import (
	"context"
	"testing"
)

// The key an earlier release kept in the database is there to be
// exported, and forgotten only once the workers are given the same one.
func TestLegacyFindingKey(t *testing.T) {
	ctx := context.Background()
	db := env.Store.Pool()
	key := []byte("a-legacy-key-of-32-bytes-0123456")
	if _, err := db.Exec(ctx, `INSERT INTO settings (name, value) VALUES ('finding_hash_key', $1)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, key); err != nil {
		t.Fatal(err)
	}
	got, ok, err := env.Store.LegacyFindingKey(ctx)
	if err != nil || !ok || string(got) != string(key) {
		t.Fatalf("legacy key: %q %t %v", got, ok, err)
	}
	if gone, err := env.Store.ForgetLegacyFindingKey(ctx, []byte("another-key-of-32-bytes-01234567")); err != nil || gone {
		t.Fatalf("forgot the key for another one: %t %v", gone, err)
	}
	if _, ok, _ := env.Store.LegacyFindingKey(ctx); !ok {
		t.Fatal("the key went for another one")
	}
	if gone, err := env.Store.ForgetLegacyFindingKey(ctx, key); err != nil || !gone {
		t.Fatalf("forget: %t %v", gone, err)
	}
	if got, ok, err := env.Store.LegacyFindingKey(ctx); err != nil || ok || got != nil {
		t.Fatalf("after forget: %q %t %v", got, ok, err)
	}
}

// A scope records the version of the key its hashes are made with; one
// made before versions were recorded gets it from the next scan under
// its policy, which never changes it afterwards.
func TestKeyedScopeRecordsTheKeyVersion(t *testing.T) {
	ctx := context.Background()
	shardID := newShard(t)
	version := func(scope int64) *int {
		t.Helper()
		var v *int
		if err := env.Store.Pool().QueryRow(ctx, `SELECT key_version FROM scan_scopes WHERE id = $1`, scope).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	old, err := env.Store.Scope(ctx, shardID, "p-old")
	if err != nil || version(old) != nil {
		t.Fatalf("unversioned scope: %v", err)
	}
	again, err := env.Store.KeyedScope(ctx, shardID, "p-old", 1)
	if err != nil || again != old || version(old) == nil || *version(old) != 1 {
		t.Fatalf("the old scope under key v1: %d %v", again, err)
	}
	if again, _ := env.Store.KeyedScope(ctx, shardID, "p-old", 3); again != old || *version(old) != 1 {
		t.Fatal("a recorded version changed")
	}
	v2, err := env.Store.KeyedScope(ctx, shardID, "p-new", 2)
	if err != nil || v2 == old || *version(v2) != 2 {
		t.Fatalf("a new key's scope: %d %v", v2, err)
	}
}
