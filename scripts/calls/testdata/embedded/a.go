package p

// Inner's method M is called through Outer, which embeds Inner.
type Inner struct{}

// M is declared here, in a.go.
func (Inner) M() {}

// UseOuter calls into b.go.
func UseOuter(o Outer) { o.N() }
