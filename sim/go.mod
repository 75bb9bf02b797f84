module github.com/resilienthttp/resilient/sim

go 1.26.0

require github.com/resilienthttp/resilient v0.0.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/google/uuid v1.6.0 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)

replace github.com/resilienthttp/resilient => ../
