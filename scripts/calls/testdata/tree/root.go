package tree

// Root calls nothing: the root package is clean.
func Root() {}
