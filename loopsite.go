package resilient

import "github.com/resilienthttp/resilient/internal/loops"

// The rules this file carries out (request, header, identical, site) and
// why each is as strong as what it may decide are in doc.go, under "Loops
// without marks". The request rule's admission is reserveOuterRetry's.

// recognise looks for the failure that c sends again, when failures are
// remembered. c's operation op has its key and body ready. When recognise
// finds one, c defers to its loop. It returns c's part of an outer loop:
// one attempt, no wait of the Transport's (applicant.single). It returns
// the operation's key: the failed call's, by the request rule.
func (c *call) recognise(op *operation) (*outerCall, string) {
	lp := &c.t.loops
	lp.Mu.Lock()
	some := lp.Hosts[c.Req.URL.Host] > 0
	lp.Mu.Unlock()
	if !some {
		return nil, op.key
	}
	lc := c.loopState()
	at := lc.Origin()
	bp := loops.BodyPrintOf(&op.body, c.Req.ContentLength)
	ns := c.cfg.nanos()
	lp.Mu.Lock()
	f, rule, strong := lp.Match(c.Req, at, bp, ns)
	if f == nil {
		lp.Mu.Unlock()
		return nil, op.key
	}
	f.Claimed = true
	lp.Site(at.Site, ns).Set(true, 0) // the site loops
	base, key := f.Attempts, f.Key
	lp.Mu.Unlock()
	lc.From, lc.Rule = f, rule
	// The re-send is never refused: another call may look the same, and
	// even the loop's own retry, refused, is an error the Transport
	// cannot know how the loop takes (a hand-written loop may spend an
	// attempt on it at once, where alone it would have sent one).
	o := &outerCall{single: true, lax: true}
	if !strong {
		return o, op.key // a first attempt, under a key of its own
	}
	lc.Base = base // the loop's retry: it takes a retry token if one is left
	if key == "" || op.own || op.key == "" {
		key = op.key
	}
	return o, key
}

// deferToSite reports whether c comes from a call site that has shown its
// loop. c is a call without marks whose attempt failed retryably. The
// Transport then sends no retry; the loop does. It is read once per call,
// on the failure path only.
func (c *call) deferToSite() bool {
	if c.outer != nil || c.outerMode() != outerAuto {
		return false
	}
	lc := c.loopState()
	if lc.Asked {
		return false // asked before: the site had not shown a loop
	}
	lc.Asked = true
	at := lc.Origin()
	lp := &c.t.loops
	lp.Mu.Lock()
	learned := lp.Learned(at.Site, c.cfg.nanos())
	lp.Mu.Unlock()
	if learned {
		lc.Rule = loops.RuleSite
		c.led.deferred(loops.RuleSite)
	}
	return learned
}

// failedRetryably remembers c, a call that ended with a retryable failure,
// so that its loop's re-send is recognised (recognise). rewound: the
// body can be read again for its fingerprint (not when a retry's GetBody
// failed: the fingerprint is then unknown).
func (c *call) failedRetryably(rewound bool) {
	if o := c.outer; o != nil && o.marked && c.Asked != 0 && c.op.key != "" {
		c.t.asked.Set(c.op.key, c.Asked, c.cfg.nanos()) // the SDK's next try waits for it
	}
	if (c.outer != nil && c.outer.marked) || c.op.hop || c.outerMode() != outerAuto {
		return
	}
	lc := c.loopState()
	f := &loops.Failure{Req: c.Req, Header: loops.HeaderPtr(c.Req.Header), Body: c.Req.Body, Sig: loops.SigOf(c.Req), Host: c.Req.URL.Host,
		Print: loops.BodyPrint{Length: c.Req.ContentLength}, From: lc.Origin(), Attempts: lc.Base + c.led.attempts, At: c.cfg.nanos()}
	if rewound {
		f.Print = loops.BodyPrintOf(&c.op.body, c.Req.ContentLength)
	}
	if !c.op.own {
		f.Key = c.op.key
	}
	if c.Asked != 0 {
		c.t.asked.Set(f, c.Asked, f.At) // the loop's re-send waits for it
	}
	c.t.loops.Record(f, lc.From == nil)
}

// loopState returns c's loopCall, made on first use.
func (c *call) loopState() *loops.Call {
	if c.loop == nil {
		c.loop = &loops.Call{}
	}
	return c.loop
}
