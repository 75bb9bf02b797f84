package p

// B is called by a.go.
func B() {}
