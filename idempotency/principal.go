package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// principalHeader is where a stored Response keeps who stored it: the
// header's value is principalVersion, then a space and the hex SHA-256 of
// the principal when there is one. It is never sent (writeResponse drops
// it). A record without it was stored before the principal was kept in
// the record (scope version 1; see legacy.go).
const principalHeader = "Idempotency-Principal"

// principalVersion prefixes principalHeader's value.
const principalVersion = "2"

// caller is who asks, as the middleware compares it.
type caller struct {
	tag     string // principalHeader's value for the caller
	v1      string // the principal hash scope version 1 scoped by ("" for none)
	cookies []string
}

// none reports whether the caller has no principal.
func (c caller) none() bool { return c.tag == principalVersion }

// owns reports whether the stored answer resp belongs to c. A record of
// scope version 1 has no principalHeader: it was found under the scope
// without a principal, so only a caller without one owns it.
func (c caller) owns(resp *Response) bool {
	v, ok := resp.Header[principalHeader]
	if !ok {
		return c.none()
	}
	return len(v) == 1 && v[0] == c.tag
}

// caller returns who asks r: Config.Principal's answer when it is set;
// else the Authorization header; else the request's cookies but the
// incidental ones (see CookiePrincipal), with a warning logged once.
func (m *Middleware) caller(r *http.Request) caller {
	if m.cfg.Principal != nil {
		return callerOf(m.cfg.Principal(r))
	}
	if a := r.Header["Authorization"]; len(a) > 0 && a[0] != "" { // Header.Get, without canonicalising the name
		return callerOf(a[0])
	}
	if _, ok := r.Header["Cookie"]; !ok {
		return caller{tag: principalVersion}
	}
	p, names := cookiePrincipal(r, nil)
	c := callerOf(p)
	c.v1, c.cookies = "", names // version 1 did not read cookies
	return c
}

// callerOf returns the caller of principal p, its tag built in one
// allocation: principalVersion, a space, the hex SHA-256 of p.
func callerOf(p string) caller {
	if p == "" {
		return caller{tag: principalVersion}
	}
	sum := sha256.Sum256([]byte(p))
	var b [len(principalVersion) + 1 + 2*sha256.Size]byte
	copy(b[:], principalVersion+" ")
	hex.Encode(b[len(principalVersion)+1:], sum[:])
	tag := string(b[:])
	return caller{tag: tag, v1: tag[len(principalVersion)+1:]}
}

// warnCookies logs once that the principal was read from cookies by
// default, naming them (never their values).
func (m *Middleware) warnCookies(ctx context.Context, c caller) {
	if len(c.cookies) == 0 || m.scope.warned.Swap(true) {
		return
	}
	m.cfg.Logger.LogAttrs(ctx, slog.LevelWarn,
		"idempotency: requests carry cookies and no Authorization: the principal is every cookie but the "+
			"incidental ones, so a retry whose other cookies changed is refused; name the session cookies "+
			"with Config.Principal = idempotency.CookiePrincipal(...)",
		slog.Any("cookies", c.cookies))
}

// scopeState is what the middleware keeps to check principals and to
// find records of scope version 1.
type scopeState struct {
	warned    atomic.Bool // the cookie warning was logged
	noRenewal atomic.Bool // the no_renewal event was logged
	legacy    legacy
}

// CookiePrincipal returns a Config.Principal that reads the Authorization
// header, else the named cookies (a session cookie): every other cookie
// may change between retries without making them another caller. A
// request with neither has no principal.
func CookiePrincipal(names ...string) func(r *http.Request) string {
	names = slices.Clone(names)
	return func(r *http.Request) string {
		if a := r.Header.Get("Authorization"); a != "" {
			return a
		}
		p, _ := cookiePrincipal(r, names)
		return p
	}
}

// cookiePrincipal returns the principal of r's cookies, "name=value"
// lines sorted: those named in only, or when only is nil every cookie
// but the incidental ones; and the names it used.
func cookiePrincipal(r *http.Request, only []string) (string, []string) {
	var kept []string
	var names []string
	for _, c := range r.Cookies() {
		if only != nil && !slices.Contains(only, c.Name) || only == nil && incidentalCookie(c.Name) {
			continue
		}
		kept = append(kept, c.Name+"="+c.Value)
		if !slices.Contains(names, c.Name) {
			names = append(names, c.Name)
		}
	}
	slices.Sort(kept)
	return strings.Join(kept, "\n"), names
}

// Cookies that load balancers (stickiness), CSRF protection and analytics
// set: they change between a request and its retry without changing who
// asks. Compared without regard to case.
var (
	incidentalNames = []string{
		"awsalb", "awsalbcors", "awsalbtg", "awsalbtgcors", "awselb", "awselbcors", "serverid", "routeid",
		"route", "ingresscookie", "gclb", "arraffinity", "arraffinitysamesite", "__cf_bm", "_cfuvid",
		"cf_clearance", "csrftoken", "csrf_token", "_csrf", "xsrf-token", "_xsrf", "__host-csrf",
		"_gid", "_fbp", "_fbc", "_gcl_au", "_clck", "_clsk", "ajs_anonymous_id",
	}
	incidentalPrefixes = []string{"bigipserver", "_ga", "_gat", "__utm", "_hj", "mp_", "_pk_"}
)

func incidentalCookie(name string) bool {
	n := strings.ToLower(name)
	if slices.Contains(incidentalNames, n) {
		return true
	}
	for _, p := range incidentalPrefixes {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// ownedClaim is a Claim whose stored answer records who stored it.
type ownedClaim struct {
	Claim
	tag string
}

func (c ownedClaim) Complete(ctx context.Context, resp *Response, expires time.Time) error {
	if resp.Header == nil {
		resp.Header = make(http.Header, 1)
	}
	resp.Header[principalHeader] = []string{c.tag}
	return c.Claim.Complete(ctx, resp, expires)
}

func problemPrincipalMismatch(header string, status int) *Response {
	return problemResponse(status, "principal-mismatch", header+" is already used",
		"This "+header+" was used with other credentials; a request never gets another caller's answer. "+
			"A new operation needs a new key.", "idempotency.principal_mismatch")
}
