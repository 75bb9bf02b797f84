package p

// T's method m is taken as a value in b.go, never called there.
type T struct{}

func (T) m() {}

// A calls into b.go.
func A() { B() }
