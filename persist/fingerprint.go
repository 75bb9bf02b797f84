package persist

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Fingerprint returns the fingerprint the resilient Transport stores in a
// Record for req: a hex SHA-256 over the method, the URL and the body. An
// application that claims an operation itself (a transactional ClaimTx)
// records it, so that a call under the operation's name with another
// request is refused before anything is sent.
//
// The body is read through req.GetBody, which http.NewRequest sets for a
// *bytes.Buffer, *bytes.Reader or *strings.Reader; req.Body is not
// touched. It returns an error for a request with a body and no GetBody
// (reading it would consume it), or if GetBody or the read fails.
func Fingerprint(req *http.Request) (string, error) {
	if req == nil || req.URL == nil {
		return "", errors.New("persist: fingerprint: nil request or URL")
	}
	h := sha256.New()
	io.WriteString(h, req.Method)
	h.Write([]byte{0})
	io.WriteString(h, req.URL.String())
	h.Write([]byte{0})
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return "", errors.New("persist: fingerprint: the request's body has no GetBody")
		}
		r, err := req.GetBody()
		if err != nil {
			return "", fmt.Errorf("persist: fingerprint: GetBody: %w", err)
		}
		_, err = io.Copy(h, r)
		r.Close()
		if err != nil {
			return "", fmt.Errorf("persist: fingerprint: reading body: %w", err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
