package x

// A calls into b.go.
func A() { B() }

// C is called back by b.go.
func C() {}
