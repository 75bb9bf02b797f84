package resilient

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
	lp.mu.Lock()
	some := lp.hosts[c.Req.URL.Host] > 0
	lp.mu.Unlock()
	if !some {
		return nil, op.key
	}
	lc := c.loopState()
	at := lc.origin()
	bp := bodyPrintOf(&op.body, c.Req.ContentLength)
	ns := c.cfg.nanos()
	lp.mu.Lock()
	f, rule, strong := lp.match(c.Req, at, bp, ns)
	if f == nil {
		lp.mu.Unlock()
		return nil, op.key
	}
	f.claimed = true
	lp.site(at.site, ns).set(true, 0) // the site loops
	base, key := f.attempts, f.key
	lp.mu.Unlock()
	lc.from, lc.rule = f, rule
	// The re-send is never refused: another call may look the same, and
	// even the loop's own retry, refused, is an error the Transport
	// cannot know how the loop takes (a hand-written loop may spend an
	// attempt on it at once, where alone it would have sent one).
	o := &outerCall{single: true, lax: true}
	if !strong {
		return o, op.key // a first attempt, under a key of its own
	}
	lc.base = base // the loop's retry: it takes a retry token if one is left
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
	if lc.asked {
		return false // asked before: the site had not shown a loop
	}
	lc.asked = true
	at := lc.origin()
	lp := &c.t.loops
	lp.mu.Lock()
	learned := lp.learned(at.site, c.cfg.nanos())
	lp.mu.Unlock()
	if learned {
		lc.rule = ruleSite
		c.led.deferred(ruleSite)
	}
	return learned
}

// failedRetryably remembers c, a call that ended with a retryable failure,
// so that its loop's re-send is recognised (recognise). rewound: the
// body can be read again for its fingerprint (not when a retry's GetBody
// failed: the fingerprint is then unknown).
func (c *call) failedRetryably(rewound bool) {
	if o := c.outer; o != nil && o.marked && c.Asked != 0 && c.op.key != "" {
		c.t.asked.set(c.op.key, c.Asked, c.cfg.nanos()) // the SDK's next try waits for it
	}
	if (c.outer != nil && c.outer.marked) || c.op.hop || c.outerMode() != outerAuto {
		return
	}
	lc := c.loopState()
	f := &failure{req: c.Req, header: headerPtr(c.Req.Header), body: c.Req.Body, sig: sigOf(c.Req), host: c.Req.URL.Host,
		print: bodyPrint{length: c.Req.ContentLength}, from: lc.origin(), attempts: lc.base + c.led.attempts, at: c.cfg.nanos()}
	if rewound {
		f.print = bodyPrintOf(&c.op.body, c.Req.ContentLength)
	}
	if !c.op.own {
		f.key = c.op.key
	}
	if c.Asked != 0 {
		c.t.asked.set(f, c.Asked, f.at) // the loop's re-send waits for it
	}
	c.t.loops.record(f, lc.from == nil)
}

// loopState returns c's loopCall, made on first use.
func (c *call) loopState() *loopCall {
	if c.loop == nil {
		c.loop = &loopCall{}
	}
	return c.loop
}
