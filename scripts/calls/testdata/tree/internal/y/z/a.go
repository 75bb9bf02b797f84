package z

// A calls into b.go, one way only.
func A() { B() }
