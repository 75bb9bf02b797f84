package z

// B calls nothing.
func B() {}
