package redisbudget_test

const childEnv = "REDISBUDGET_CHILD"

func child() int { return 0 }
