package skip

// testdata is not a package of the tree: never checked.
func S() { T() }
