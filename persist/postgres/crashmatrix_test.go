package postgres_test

const matrixDSNEnv = "RESILIENT_PG_MATRIX_DSN"

func matrixChild() int { return 0 }
