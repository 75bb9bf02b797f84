package pushback

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// ProblemType is the RFC 9457 problem type of the body of a pushback answer.
const ProblemType = "https://github.com/resilienthttp/resilient/problems/retry-pushback"

// Header values shared by every answer. Each slice has its length as
// capacity, so that a handler appending to the header copies it rather than
// writing into the shared array.
var (
	valueFalse   = []string{"false"}
	valueProblem = []string{"application/problem+json"}
)

// Why a request is refused.
const (
	reasonBudget   = iota // a retry over the budget
	reasonOverload        // MaxInFlight reached (for this kind of attempt)
	numReasons
)

// answers holds the pushback answers, rendered once.
type answers struct {
	status     int
	retryAfter [][]string // Retry-After values, one per whole second of the range
	body       [numReasons][]byte
	length     [numReasons][]string // Content-Length of body
	seed       uint64               // Config.Seed: if not 0, Retry-After is drawn from it, else from math/rand/v2
	keyHeader  string               // the key that seeded draws hash
	draws      atomic.Uint64        // seeded draws for requests without a key
}

func newAnswers(s settings) *answers {
	a := &answers{status: s.status, seed: s.seed, keyHeader: s.keyHeader}
	for sec := s.raMin; sec <= s.raMax; sec++ {
		a.retryAfter = append(a.retryAfter, []string{strconv.Itoa(sec)})
	}
	details := [numReasons]string{
		reasonBudget:   "retries to this server are over their budget: do not retry this request; first attempts are still served",
		reasonOverload: "the server is shedding load, retries first: do not retry this request before Retry-After",
	}
	for r, detail := range details {
		body, err := json.Marshal(struct {
			Type   string `json:"type"`
			Title  string `json:"title"`
			Status int    `json:"status"`
			Detail string `json:"detail"`
		}{ProblemType, "Retry pushback", s.status, detail})
		if err != nil { // cannot happen: strings and an int
			panic("pushback: " + err.Error())
		}
		a.body[r] = append(body, '\n')
		a.length[r] = []string{strconv.Itoa(len(a.body[r]))}
	}
	return a
}

// pickRetryAfter returns a Retry-After value drawn from the range for the
// answer to r at now. With a seed, the draw is a function of the seed, r's
// key and now, so that answers written at one instant draw the same values
// in any order; for a request without a key, of the seed and how many such
// draws came before.
func (a *answers) pickRetryAfter(r *http.Request, now time.Duration) []string {
	n := len(a.retryAfter)
	switch {
	case n == 1:
		return a.retryAfter[0]
	case a.seed == 0:
		return a.retryAfter[rand.IntN(n)]
	}
	var x uint64
	if v := r.Header[a.keyHeader]; len(v) > 0 && v[0] != "" {
		x = seededHash(a.seed, v[0]) ^ uint64(now)
	} else {
		x = a.seed + a.draws.Add(1)*0x9e3779b97f4a7c15 // SplitMix64's n-th state
	}
	return a.retryAfter[mix64(x)%uint64(n)]
}

// hint adds the pushback headers to h, the header of the answer to r at
// now: X-Should-Retry: false, and a Retry-After unless h has one.
func (a *answers) hint(h http.Header, r *http.Request, now time.Duration) {
	h["X-Should-Retry"] = valueFalse
	if _, ok := h["Retry-After"]; !ok {
		h["Retry-After"] = a.pickRetryAfter(r, now)
	}
}

// refuse writes the pushback answer for reason to w, in place of the
// handler's answer to r at now.
func (a *answers) refuse(w http.ResponseWriter, reason int, r *http.Request, now time.Duration) {
	h := w.Header()
	h["Content-Type"] = valueProblem
	h["Content-Length"] = a.length[reason]
	h["X-Should-Retry"] = valueFalse
	h["Retry-After"] = a.pickRetryAfter(r, now)
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body[reason])
}
