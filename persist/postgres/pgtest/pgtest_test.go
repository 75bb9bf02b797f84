package pgtest_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/persist/postgres/pgtest"
)

func TestStartStop(t *testing.T) {
	srv, err := pgtest.Start("")
	require.NoError(t, err)
	defer srv.Stop()
	conn, err := pgx.Connect(t.Context(), srv.DSN())
	require.NoError(t, err)
	var fsync, syncCommit string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT current_setting('fsync'), current_setting('synchronous_commit')`).Scan(&fsync, &syncCommit))
	assert.Equal(t, "on", fsync)
	assert.Equal(t, "on", syncCommit)
	require.NoError(t, conn.Close(context.Background()))

	srv.Stop()
	srv.Stop() // again: a no-op
	_, err = os.Stat(srv.Dir())
	assert.True(t, os.IsNotExist(err), "the directory is removed: %v", err)
}

func TestBin(t *testing.T) {
	p, err := pgtest.Bin("pg_ctl")
	require.NoError(t, err)
	assert.FileExists(t, p)
	_, err = pgtest.Bin("no-such-postgres-program")
	assert.ErrorContains(t, err, "postgresql")
}
