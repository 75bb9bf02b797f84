module github.com/resilienthttp/resilient/persist/postgres

go 1.26.0

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/resilienthttp/resilient v0.1.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)
