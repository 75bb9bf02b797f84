package sdk

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// The server recomputes each signed request's signature, as the real
// services do, so that a try the Transport sends (a copy, with its own
// headers added) is shown to be one the service would accept.

// checkSharedKey verifies Azure Storage's Shared Key signature of account
// with key (base64).
func checkSharedKey(account, key string) func(*http.Request, []byte) error {
	secret, _ := base64.StdEncoding.DecodeString(key)
	return func(req *http.Request, _ []byte) error {
		auth := req.Header.Get("Authorization")
		want, ok := strings.CutPrefix(auth, "SharedKey "+account+":")
		if !ok {
			return fmt.Errorf("shared key: authorization %q", auth)
		}
		h := req.Header
		cl := h.Get("Content-Length")
		if cl == "0" {
			cl = ""
		}
		var xms []string
		for k, v := range h {
			if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-ms-") {
				xms = append(xms, lk+":"+strings.Join(v, ","))
			}
		}
		sort.Strings(xms)
		res := "/" + account + req.URL.EscapedPath()
		q := req.URL.Query()
		var names []string
		for n := range q {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			vs := q[n]
			sort.Strings(vs)
			res += "\n" + strings.ToLower(n) + ":" + strings.Join(vs, ",")
		}
		sts := strings.Join([]string{req.Method, h.Get("Content-Encoding"), h.Get("Content-Language"), cl, h.Get("Content-MD5"),
			h.Get("Content-Type"), "", h.Get("If-Modified-Since"), h.Get("If-Match"), h.Get("If-None-Match"),
			h.Get("If-Unmodified-Since"), h.Get("Range"), strings.Join(xms, "\n"), res}, "\n")
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(sts))
		if got := base64.StdEncoding.EncodeToString(m.Sum(nil)); got != want {
			return errors.New("shared key: signature mismatch")
		}
		return nil
	}
}

// checkSigV4 verifies an AWS Signature Version 4 of accessKey with secret:
// the header signature, which for a streamed upload is the seed the chunk
// signatures chain from. (The chunks' signatures are not checked.) The
// payload hash it covers is X-Amz-Content-Sha256 (S3: checkBody holds it
// to the body), or the body's own hash where the SDK sends none (DynamoDB).
func checkSigV4(accessKey, secret string) func(*http.Request, []byte) error {
	return func(req *http.Request, body []byte) error {
		auth, ok := strings.CutPrefix(req.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ")
		if !ok {
			return errors.New("sigv4: no AWS4-HMAC-SHA256 authorization")
		}
		fields := map[string]string{}
		for _, p := range strings.Split(auth, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			fields[k] = v
		}
		cred := strings.SplitN(fields["Credential"], "/", 2)
		if len(cred) != 2 || cred[0] != accessKey {
			return fmt.Errorf("sigv4: credential %q", fields["Credential"])
		}
		scope := cred[1]
		parts := strings.Split(scope, "/")
		if len(parts) != 4 {
			return fmt.Errorf("sigv4: scope %q", scope)
		}
		signed := strings.Split(fields["SignedHeaders"], ";")
		var ch strings.Builder
		for _, name := range signed {
			var v string
			switch name {
			case "host":
				v = req.Host
				if v == "" {
					v = req.URL.Host
				}
			case "content-length":
				v = strconv.FormatInt(req.ContentLength, 10)
			default:
				v = strings.Join(req.Header.Values(name), ",")
			}
			ch.WriteString(name + ":" + strings.Join(strings.Fields(v), " ") + "\n")
		}
		query := strings.ReplaceAll(req.URL.Query().Encode(), "+", "%20")
		payload := req.Header.Get("X-Amz-Content-Sha256")
		if payload == "" {
			// Not sent (DynamoDB): the signature covers the body's hash.
			sum := sha256.Sum256(body)
			payload = hex.EncodeToString(sum[:])
		}
		canon := strings.Join([]string{req.Method, (&url.URL{Path: req.URL.Path}).EscapedPath(), query, ch.String(),
			fields["SignedHeaders"], payload}, "\n")
		sum := sha256.Sum256([]byte(canon))
		sts := strings.Join([]string{"AWS4-HMAC-SHA256", req.Header.Get("X-Amz-Date"), scope, hex.EncodeToString(sum[:])}, "\n")
		k := []byte("AWS4" + secret)
		for _, p := range parts {
			k = hmacSHA256(k, p)
		}
		if hex.EncodeToString(hmacSHA256(k, sts)) != fields["Signature"] {
			return errors.New("sigv4: signature mismatch")
		}
		return nil
	}
}

// checkBody verifies that a request's body is the one its headers announce
// and its signature covers: as long as its ContentLength and its
// Content-Length field (which Azure's Shared Key signs), and, where
// X-Amz-Content-Sha256 is a hash, of that SHA-256 (SigV4's payload hash).
// An attempt whose body was read by someone else first fails here.
func checkBody(req *http.Request, body []byte) error {
	n := int64(len(body))
	if req.ContentLength > 0 && n != req.ContentLength {
		return fmt.Errorf("body: %d bytes, ContentLength %d", n, req.ContentLength)
	}
	if cl := req.Header.Get("Content-Length"); cl != "" && cl != strconv.FormatInt(n, 10) {
		return fmt.Errorf("body: %d bytes, Content-Length: %s", n, cl)
	}
	if h := req.Header.Get("X-Amz-Content-Sha256"); len(h) == 2*sha256.Size {
		if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != h {
			return errors.New("body: not the payload x-amz-content-sha256 hashes")
		}
	}
	return nil
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}
