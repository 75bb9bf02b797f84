// Package loops is what a Transport remembers of other retry loops, and
// the one place that recognises them: pending calls of SDKs that mark
// their retries, recent keys of the application's, failures a loop without
// marks may send again and the call sites that loop, the delays servers
// named for a loop's next try, and the calls of one key in flight. The
// root asks it three questions (calls.go); the stack walk, the Header
// map's pointer and the body prints stay inside.
package loops

import (
	"net/http"

	"github.com/resilienthttp/resilient/internal/clock"
	"github.com/resilienthttp/resilient/internal/wire"
)

// What a call asks of the loops a Transport remembers, on the failure path
// only (the root's loops.go asks): whether a call is a loop's re-send of a
// failure (Recognise), whether its call site has shown a loop (Defers),
// and, once it failed retryably, to be remembered (Failed). The runtime's
// stack, the Header map's pointer and the bodies' prints stay behind these.

// Remembers reports whether a failure to host is remembered: a call to it
// may be a loop's re-send (Recognise).
func (lp *Sites) Remembers(host string) bool {
	lp.Mu.Lock()
	defer lp.Mu.Unlock()
	return lp.Hosts[host] > 0
}

// Recognise looks for the failure that lc's call, req with body, sends
// again, on a host that Remembers. found is false when none matches. On a find the failure is claimed, lc's site is marked as one
// that loops, and lc remembers the failure and its rule. strong: the
// rule ties req to that failure's operation; base and key are then the
// attempts it sent and its key ("" if the Transport's own was not kept),
// and lc counts from base.
func (lp *Sites) Recognise(lc *Call, req *http.Request, body *wire.ReplayBody, clk *clock.Clock) (found, strong bool, base int, key string) {
	at := lc.Origin()
	bp := bodyPrintOf(body, req.ContentLength)
	ns := clk.Nanos()
	lp.Mu.Lock()
	f, rule, strong := lp.match(req, at, bp, ns)
	if f == nil {
		lp.Mu.Unlock()
		return false, false, 0, ""
	}
	f.Claimed = true
	lp.site(at.Site, ns).set(true, 0) // the site loops
	base, key = f.Attempts, f.Key
	lp.Mu.Unlock()
	lc.From, lc.Rule = f, rule
	if strong {
		lc.Base = base // the loop's retry: it takes a retry token if one is left
	}
	return true, strong, base, key
}

// Defers reports whether lc's call comes from a call site that has shown
// its loop, at now: the call then sends no retry of its own. It is asked
// once per call; a later ask is false. On true lc's rule is RuleSite.
func (lp *Sites) Defers(lc *Call, clk *clock.Clock) bool {
	if lc.Asked {
		return false // asked before: the site had not shown a loop
	}
	lc.Asked = true
	at := lc.Origin()
	lp.Mu.Lock()
	learned := lp.learned(at.Site, clk.Nanos())
	lp.Mu.Unlock()
	if learned {
		lc.Rule = RuleSite
	}
	return learned
}

// Failed remembers lc's call, req with body, as a failure that its loop may
// send again: after attempts in all (lc's base included), at now, under key
// ("" for a key of the application's). rewound: the body can be read again
// for its print. It returns the failure, under which a server's delay for
// the loop's next try is kept (Asked).
func (lp *Sites) Failed(lc *Call, req *http.Request, body *wire.ReplayBody, rewound bool, key string, attempts int, now int64) *Failure {
	f := &Failure{Req: req, Header: headerPtr(req.Header), Body: req.Body, Sig: sigOf(req), Host: req.URL.Host,
		Print: BodyPrint{Length: req.ContentLength}, From: lc.Origin(), Attempts: attempts, At: now, Key: key}
	if rewound {
		f.Print = bodyPrintOf(body, req.ContentLength)
	}
	lp.record(f, lc.From == nil)
	return f
}
