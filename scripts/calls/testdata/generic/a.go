package p

// G has two type parameters: b.go calls G[int, string].
func G[A, B any](a A, b B) {}

// A calls into b.go.
func A() { H() }
