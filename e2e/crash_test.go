package e2e

const crashChildEnv = "E2E_CRASH_CHILD"

func crashChild() int { return 0 }
