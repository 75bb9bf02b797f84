package p

// A calls into b.go, which calls back A2.
func A() { B() }

// A2 is called by b.go.
func A2() {}
