module github.com/resilienthttp/resilient/e2e

go 1.26.0

require (
	github.com/Shopify/toxiproxy/v2 v2.12.0
	github.com/resilienthttp/resilient v0.0.0
	github.com/stretchr/testify v1.12.1
	github.com/stripe/stripe-go/v85 v85.0.0
	go.uber.org/goleak v1.3.0
	golang.org/x/net v0.55.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.45.0 // indirect
	golang.org/x/text v0.37.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)

replace github.com/resilienthttp/resilient => ../
