package sim

import (
	"io"
	"log"
)

func newDiscardLogger() *log.Logger { return log.New(io.Discard, "", 0) }
