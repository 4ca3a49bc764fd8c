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
		body  = "Action=GetCallerIdentity&Version=2011-06-15"
		ctype = "application/x-www-form-urlencoded; charset=utf-8"
	)
	amzDate := now.UTC().Format("20060102T150405Z")
	auth := sigV4(signing{method: "POST", host: "sts.amazonaws.com", path: "/", body: body, contentType: ctype,
		region: "us-east-1", service: "sts", keyID: s.Value, secret: s.Pair, now: now})
	return Request{Method: "POST", Path: "/", Body: body, Header: map[string]string{
		"Content-Type": ctype, "X-Amz-Date": amzDate, "Authorization": auth}}
}

// signing is what a Signature Version 4 signature covers: the request
// (method, host, path, query, body, content type, date) and the scope.
type signing struct {
	method, host, path, query, body, contentType string
	region, service, keyID, secret               string
	now                                          time.Time
}

// sigV4 is the Authorization header of s, signed over the content type,
// host and date headers.
func sigV4(s signing) string {
	now := s.now.UTC()
	amzDate := now.Format("20060102T150405Z")
	day := now.Format("20060102")
	canonical := strings.Join([]string{s.method, s.path, s.query,
		"content-type:" + s.contentType, "host:" + s.host, "x-amz-date:" + amzDate, "",
		"content-type;host;x-amz-date", sha256Hex(s.body)}, "\n")
	scope := day + "/" + s.region + "/" + s.service + "/aws4_request"
	toSign := strings.Join([]string{"AWS4-HMAC-SHA256", amzDate, scope, sha256Hex(canonical)}, "\n")
	key := hmacSHA256([]byte("AWS4"+s.secret), day)
	key = hmacSHA256(key, s.region)
	key = hmacSHA256(key, s.service)
	key = hmacSHA256(key, "aws4_request")
	return "AWS4-HMAC-SHA256 Credential=" + s.keyID + "/" + scope +
		", SignedHeaders=content-type;host;x-amz-date, Signature=" + hex.EncodeToString(hmacSHA256(key, toSign))
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
