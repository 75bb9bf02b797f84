package fakeserver

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/resilienthttp/resilient/idempotency"
)

const (
	// adminPrefix is the path prefix of the admin endpoints.
	adminPrefix = "/_fake/"
	// maxBodyBytes bounds a request body; a larger one is answered with 413.
	maxBodyBytes = 1 << 20
	// Values of the Idempotency-Status response header.
	statusStored   = idempotency.StatusStored
	statusReplayed = idempotency.StatusReplayed
)

// serveAPI serves /v1/: admission (outages, capacity), validation, the
// route's fault, then the idempotent create or the read. serveHTTP has
// counted the request and echoed its key.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	now := s.now()
	s.stats.enter()
	defer s.stats.leave()
	cfg := s.cfg.Load()

	if o := cfg.outageAt(now.Sub(time.Unix(0, s.epoch.Load()))); o != nil {
		s.stats.fault(faultOutage)
		p := problemResponse(o.Status, "outage", statusTitle(o.Status), "fakeserver: scripted outage", "")
		if o.RetryAfter > 0 {
			p.header.Set("Retry-After", retryAfterSeconds(time.Duration(o.RetryAfter)))
		}
		s.send(w, r, p, "", Fault{})
		return
	}
	if c := cfg.capacity; c != nil {
		switch c.acquire(ctx, s.closing) {
		case shed:
			s.stats.shed.Add(1)
			c.owe()
			p := problemResponse(http.StatusServiceUnavailable, "over-capacity", "Service Unavailable",
				"fakeserver: over capacity", "")
			if c.retryAfter > 0 {
				p.header.Set("Retry-After", retryAfterSeconds(c.retryAfter))
			}
			s.send(w, r, p, "", Fault{})
			return
		case gone:
			abortConn(w, abortGone)
		}
		defer c.release()
		if !s.sleep(ctx, c.hold()) {
			abortConn(w, abortGone)
		}
	}
	s.stats.admitted.Add(1) // past the capacity model, if any: the API works on it

	collection, id, ok := parseAPIPath(r.URL.Path)
	if !ok {
		s.stats.badRequests.Add(1)
		s.send(w, r, problemResponse(http.StatusNotFound, "not-found", "Not Found",
			"no such route: the API is POST /v1/{collection} and GET /v1/{collection}/{id}", ""), "", Fault{})
		return
	}
	rp := cfg.route(r.Method, r.URL.Path)
	switch {
	case r.Method == http.MethodPost && id == "":
		s.servePost(w, r, cfg, rp, collection)
	case r.Method == http.MethodGet && id != "":
		s.serveGet(w, r, rp, collection, id)
	default:
		s.stats.badRequests.Add(1)
		p := problemResponse(http.StatusMethodNotAllowed, "method-not-allowed", "Method Not Allowed",
			r.Method+" is not allowed here", "")
		if id == "" {
			p.header.Set("Allow", http.MethodPost)
		} else {
			p.header.Set("Allow", http.MethodGet)
		}
		s.send(w, r, p, "", Fault{})
	}
}

// servePost creates an object in collection, idempotently when the request
// carries a key: then package idempotency decides (see serveKeyed).
func (s *Server) servePost(w http.ResponseWriter, r *http.Request, cfg *config, rp *routePlan, collection string) {
	key, hasKey, err := idempotency.ParseKey(r.Header, "Idempotency-Key")
	if err != nil {
		s.stats.badRequests.Add(1)
		s.send(w, r, problemInvalidKey(err), "", Fault{})
		return
	}
	if !hasKey && (cfg.requireKey || rp != nil && rp.requireKey) {
		s.stats.missingKeys.Add(1)
		s.send(w, r, problemMissingKey(), "", Fault{})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		abortConn(w, abortGone) // the client went away while sending
	}
	if len(body) > maxBodyBytes {
		s.stats.badRequests.Add(1)
		s.send(w, r, problemResponse(http.StatusRequestEntityTooLarge, "too-large", "Content Too Large",
			"the body is larger than "+strconv.Itoa(maxBodyBytes)+" bytes", ""), "", Fault{})
		return
	}
	obj, err := decodeObject(body)
	if err != nil {
		s.stats.badRequests.Add(1)
		s.send(w, r, problemResponse(http.StatusBadRequest, "invalid-json", "Malformed JSON body",
			err.Error(), ""), "", Fault{})
		return
	}

	f := rp.next(rp.operationOf(r, key), &s.ops)
	sc := scope{principal: principalOf(r), route: http.MethodPost + " /v1/" + collection, key: key}
	if !hasKey {
		if resp := s.pre(w, r, f); resp != nil {
			s.send(w, r, resp, "", f)
			return
		}
		s.send(w, r, s.create(collection, obj, sc, false), "", f)
		return
	}
	s.serveKeyed(w, r, cfg, f, &post{sc: sc, collection: collection, obj: obj, body: body})
}

// create is the effect: it appends a new object to the ledger and returns the
// 201 answer.
func (s *Server) create(collection string, obj map[string]any, sc scope, hasKey bool) *response {
	now := s.now()
	id := idPrefix(collection) + "_" + pad8(s.seq.Add(1))
	obj["id"], obj["object"], obj["created"] = id, collection, now.Unix()
	body, err := json.Marshal(obj)
	if err != nil { // cannot happen: obj was decoded from JSON
		panic("fakeserver: " + err.Error())
	}
	s.led.add(Entry{
		ID:         id,
		Collection: collection,
		Key:        sc.key,
		Principal:  principalID(sc.principal),
		Object:     body,
		Created:    now,
	}, sc, hasKey)
	return &response{
		status: http.StatusCreated,
		header: http.Header{
			"Content-Type": {"application/json"},
			"Location":     {"/v1/" + collection + "/" + id},
		},
		body: append(body[:len(body):len(body)], '\n'),
	}
}

// serveGet reads an object.
func (s *Server) serveGet(w http.ResponseWriter, r *http.Request, rp *routePlan, collection, id string) {
	f := rp.next(rp.operationOf(r, ""), &s.ops)
	if resp := s.pre(w, r, f); resp != nil {
		s.send(w, r, resp, "", f)
		return
	}
	e, ok := s.led.get(id)
	if !ok || e.Collection != collection {
		s.send(w, r, problemResponse(http.StatusNotFound, "not-found", "Not Found",
			"no object "+id+" in "+collection, ""), "", f)
		return
	}
	s.send(w, r, &response{
		status: http.StatusOK,
		header: http.Header{"Content-Type": {"application/json"}},
		body:   append(e.Object[:len(e.Object):len(e.Object)], '\n'),
	}, "", f)
}

// parseAPIPath splits /v1/{collection} and /v1/{collection}/{id}. A collection
// is 1 to 64 of [a-z0-9_-].
func parseAPIPath(path string) (collection, id string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/v1/")
	if !ok {
		return "", "", false
	}
	collection, id, _ = strings.Cut(strings.TrimSuffix(rest, "/"), "/")
	if len(collection) == 0 || len(collection) > 64 || strings.Contains(id, "/") {
		return "", "", false
	}
	for i := 0; i < len(collection); i++ {
		c := collection[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return "", "", false
		}
	}
	return collection, id, true
}

// idPrefix derives an id prefix from a collection: its first letter and the
// next consonant ("refunds" → "rf", "charges" → "ch").
func idPrefix(collection string) string {
	for i := 1; i < len(collection); i++ {
		c := collection[i]
		if 'a' <= c && c <= 'z' && !strings.ContainsRune("aeiou", rune(c)) {
			return collection[:1] + string(c)
		}
	}
	return collection[:min(2, len(collection))]
}

// pad8 formats n in decimal with at least 8 digits.
func pad8(n int64) string {
	s := strconv.FormatInt(n, 10)
	if len(s) < 8 {
		s = strings.Repeat("0", 8-len(s)) + s
	}
	return s
}

func statusTitle(code int) string {
	if t := http.StatusText(code); t != "" {
		return t
	}
	return "Status " + strconv.Itoa(code)
}
