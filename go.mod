module github.com/resilienthttp/resilient

go 1.26.0

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/jarcoal/httpmock v1.4.2 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)
