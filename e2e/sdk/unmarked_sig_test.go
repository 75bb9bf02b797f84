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

// checkSigV4 verifies an AWS Signature Version 4 (S3) of accessKey with
// secret: the header signature, which for a streamed upload is the seed
// the chunk signatures chain from. (The chunks' signatures are not
// checked.)
func checkSigV4(accessKey, secret string) func(*http.Request, []byte) error {
	return func(req *http.Request, _ []byte) error {
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
		canon := strings.Join([]string{req.Method, (&url.URL{Path: req.URL.Path}).EscapedPath(), query, ch.String(),
			fields["SignedHeaders"], req.Header.Get("X-Amz-Content-Sha256")}, "\n")
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

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}
