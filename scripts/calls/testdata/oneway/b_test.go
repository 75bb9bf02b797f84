package p

// Tests are not the package: this call back into a.go is not counted.
func testA() { A() }
