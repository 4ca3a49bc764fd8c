package validity

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"time"
)

// stsRequest is STS GetCallerIdentity signed with Signature Version 4 from
// the key pair (s.Value the key id, s.Pair the secret access key), in
// us-east-1, where the global endpoint signs.
func stsRequest(s Secret, now time.Time) Request {
	const (
		host    = "sts.amazonaws.com"
		region  = "us-east-1"
		service = "sts"
		body    = "Action=GetCallerIdentity&Version=2011-06-15"
		ctype   = "application/x-www-form-urlencoded; charset=utf-8"
	)
	now = now.UTC()
	amzDate := now.Format("20060102T150405Z")
	day := now.Format("20060102")
	payload := sha256Hex(body)
	canonical := strings.Join([]string{"POST", "/", "",
		"content-type:" + ctype, "host:" + host, "x-amz-date:" + amzDate, "",
		"content-type;host;x-amz-date", payload}, "\n")
	scope := day + "/" + region + "/" + service + "/aws4_request"
	toSign := strings.Join([]string{"AWS4-HMAC-SHA256", amzDate, scope, sha256Hex(canonical)}, "\n")
	key := hmacSHA256([]byte("AWS4"+s.Pair), day)
	key = hmacSHA256(key, region)
	key = hmacSHA256(key, service)
	key = hmacSHA256(key, "aws4_request")
	sig := hex.EncodeToString(hmacSHA256(key, toSign))
	return Request{Method: "POST", Path: "/", Body: body, Header: map[string]string{
		"Content-Type": ctype,
		"X-Amz-Date":   amzDate,
		"Authorization": "AWS4-HMAC-SHA256 Credential=" + s.Value + "/" + scope +
			", SignedHeaders=content-type;host;x-amz-date, Signature=" + sig,
	}}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

func basic(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}
