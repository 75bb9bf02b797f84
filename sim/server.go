package sim

import (
	"io"
	"log"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/resilienthttp/resilient/fakeserver"
)

// quietLog drops the http.Server's log lines (aborted handlers).
var quietLog = log.New(io.Discard, "", 0)

// server is the API: a redirect in front of some operations, the faults
// of the plan, and the fakeserver's handler (which dedupes by key unless
// the plan's server ignores keys: then it never sees them).
type server struct {
	fs   *fakeserver.Server
	plan *Plan

	mu       sync.Mutex
	arrivals map[string]int // op → requests arrived
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if name, ok := strings.CutPrefix(r.URL.Path, "/r/"); ok {
		op := s.plan.op(strings.Split(name, "/")[0])
		if op == nil || op.Redirect == 0 {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Location", "/v1/"+name) // name holds the rest of the path
		w.WriteHeader(op.Redirect)
		return
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
	var f Fault
	if op := s.plan.op(name); op != nil {
		s.mu.Lock()
		k := s.arrivals[name]
		s.arrivals[name]++
		s.mu.Unlock()
		if k < len(op.Faults) {
			f = op.Faults[k]
		}
	}
	if s.plan.IgnoreKeys {
		r.Header.Del("Idempotency-Key")
	}
	switch f.Kind {
	case FaultNone:
	case FaultDrop:
		panic(http.ErrAbortHandler) // closed before the server handled it
	default:
		if err := s.fs.Enqueue(r.Method+" "+r.URL.Path, fakeFault(f)); err != nil {
			panic(err) // a plan's fault is always valid
		}
	}
	s.fs.Handler().ServeHTTP(w, r)
}

// fakeFault is the fakeserver's form of a server-side fault.
func fakeFault(f Fault) fakeserver.Fault {
	switch f.Kind {
	case FaultStatus:
		return fakeserver.Fault{Kind: fakeserver.FaultStatus, Status: f.Status, RetryAfter: fakeserver.Duration(f.RetryAfter)}
	case FaultReset:
		return fakeserver.Fault{Kind: fakeserver.FaultReset}
	case FaultLost:
		return fakeserver.Fault{Kind: fakeserver.FaultLostResponse}
	case FaultHang:
		return fakeserver.Fault{Kind: fakeserver.FaultHang}
	case FaultLatency:
		return fakeserver.Fault{Kind: fakeserver.FaultLatency, Latency: fakeserver.Duration(f.Delay)}
	case FaultTruncated:
		return fakeserver.Fault{Kind: fakeserver.FaultTruncatedBody}
	case FaultSlowBody:
		return fakeserver.Fault{Kind: fakeserver.FaultSlowBody, BodyDuration: fakeserver.Duration(max(f.Delay, time.Millisecond))}
	}
	return fakeserver.Fault{}
}
