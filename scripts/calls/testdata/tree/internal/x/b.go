package x

// B calls back into a.go.
func B() { C() }
