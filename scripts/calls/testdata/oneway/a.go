package p

// A calls into b.go; b.go never calls back.
func A() { B() }
