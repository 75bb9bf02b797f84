package resilient

// A server's delay holds on every path. The Transport's own retries wait
// it (decide.go); a 429's pause holds the host (settle.go). A retry that
// an outer loop sends, an SDK's marked loop or a hand-written one, is a
// call of its own: the time its server named for the operation's next try
// is kept here between the calls. The loop's next try waits what is left
// of it (hostState.outerWait), within the caller's deadline: the one wait
// the Transport adds to a loop, the server's.

// askedBefore returns the time the server named for the next try of the
// operation c, an outer loop's call, continues: 0 if none.
func (c *call) askedBefore(now int64) int64 {
	switch {
	case c.loop != nil && c.loop.From != nil:
		return c.t.asked.Get(c.loop.From, now)
	case c.outer != nil && c.outer.marked && c.op.key != "":
		return c.t.asked.Get(c.op.key, now)
	}
	return 0
}
