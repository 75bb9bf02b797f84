package p

// B calls back into a.go, twice.
func B() { A2(); A2() }
