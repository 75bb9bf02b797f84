package p

// H calls back into a.go through an explicit instance of G.
func H() { G[int, string](1, "") }
