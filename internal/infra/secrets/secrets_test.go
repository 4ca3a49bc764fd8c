package secrets

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestSealOpen(t *testing.T) {
	box, err := ParseKey(NewKey())
	if err != nil {
		t.Fatal(err)
	}
	other, _ := ParseKey(NewKey())
	token := []byte("ghp_" + strings.Repeat("x", 36))
	sealed := box.Seal(token, "user:1")
	if bytes.Contains(sealed, token) {
		t.Fatal("the sealed value contains the token")
	}
	if got, err := box.Open(sealed, "user:1"); err != nil || !bytes.Equal(got, token) {
		t.Fatalf("open = %q, %v", got, err)
	}
	tampered := append([]byte(nil), sealed...)
	tampered[len(tampered)-1] ^= 1
	for _, tc := range []struct {
		name    string
		box     *Box
		sealed  []byte
		context string
		want    string
	}{
		{"wrong key", other, sealed, "user:1", "another key"},
		{"another row", box, sealed, "user:2", "does not open"},
		{"tampered", box, tampered, "user:1", "does not open"},
		{"truncated", box, sealed[:10], "user:1", "truncated"},
	} {
		if _, err := tc.box.Open(tc.sealed, tc.context); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

func TestParseKey(t *testing.T) {
	hexKey := hex.EncodeToString(bytes.Repeat([]byte{7}, 32))
	for _, tc := range []struct {
		text string
		ok   bool
	}{
		{NewKey(), true},
		{hexKey, true},
		{"  " + hexKey + "\n", true},
		{"", false},
		{"short", false},
		{hexKey[:62], false},
	} {
		_, err := ParseKey(tc.text)
		if (err == nil) != tc.ok {
			t.Errorf("ParseKey(%q) = %v, want ok=%t", tc.text, err, tc.ok)
		}
		if err != nil && strings.Contains(err.Error(), tc.text) && tc.text != "" {
			t.Errorf("the error repeats the key text: %v", err)
		}
	}
	if _, err := ParseKey(""); !errors.Is(err, ErrNoKey) {
		t.Errorf("empty key: %v, want ErrNoKey", err)
	}
}
