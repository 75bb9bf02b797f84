package storm

// Bounds of the connections per strategy that connLimit derives.
const (
	minConns = 16
	maxConns = 512
	// reservedFiles are descriptors left for everything but the storm's
	// connections (the binary, the Go runtime, logs, plots).
	reservedFiles = 256
)

// connLimit returns the most connections each of side strategies running at
// once may open: configured if positive, else an even share of the file
// descriptors (after RaiseFileLimit), two per connection since client and
// server are both in this process, within [minConns, maxConns].
func connLimit(configured, side int) int {
	if configured > 0 {
		return configured
	}
	limit, _ := RaiseFileLimit()
	if limit == 0 || limit > 1<<30 {
		return maxConns
	}
	per := (int(limit) - reservedFiles) / (2 * max(side, 1))
	return min(max(per, minConns), maxConns)
}
