package p

// Outer embeds Inner: o.M() runs code declared in a.go.
type Outer struct{ Inner }

// N is declared in b.go.
func (Outer) N() {}

// Call calls Inner.M, declared in a.go, through the embedded field.
func Call(o Outer) { o.M() }

// Ptr does the same through a pointer and two levels of embedding.
type Ptr struct{ *Outer }

// CallPtr calls Inner.M through *Outer.
func CallPtr(p Ptr) { p.M() }
