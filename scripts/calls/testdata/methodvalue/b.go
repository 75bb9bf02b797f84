package p

// B reaches a.go only through a method value, handed to run.
func B() {
	var t T
	run(t.m)
}

func run(f func()) { f() }
