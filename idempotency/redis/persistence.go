package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	goredis "github.com/redis/go-redis/v9"
)

// ErrNotDurable is wrapped by New's error when Redis runs without the
// append-only file: a stored answer would not survive a restart of Redis,
// and a retry after it would run the handler again.
var ErrNotDurable = errors.New("idempotency/redis: Redis runs without the append-only file (appendonly no): " +
	"records would not survive a restart; set appendonly yes and appendfsync always, or pass AllowVolatile")

// checkPersistence reads appendonly and appendfsync and fails, warns or
// accepts as the package documentation says.
func checkPersistence(ctx context.Context, client goredis.UniversalClient, o options) error {
	cfg, err := client.ConfigGet(ctx, "append*").Result()
	if err != nil {
		if !o.volatile {
			return fmt.Errorf("idempotency/redis: read Redis's persistence settings (CONFIG GET appendonly): %w; "+
				"if CONFIG is disabled, check them yourself and pass AllowVolatile", err)
		}
		o.logger.WarnContext(ctx, "idempotency/redis: cannot read Redis's persistence settings; records may not survive a restart of Redis",
			slog.String("error", err.Error()))
		return nil
	}
	switch aof, fsync := cfg["appendonly"], cfg["appendfsync"]; {
	case aof != "yes" && !o.volatile:
		return fmt.Errorf("%w (appendonly %q)", ErrNotDurable, aof)
	case aof != "yes":
		o.logger.WarnContext(ctx, "idempotency/redis: Redis runs without the append-only file; records die with the Redis process",
			slog.String("appendonly", aof))
	case fsync != "always":
		o.logger.WarnContext(ctx, "idempotency/redis: appendfsync is not always; a crash of Redis's host may lose the last second of records (a crash of the process alone loses none)",
			slog.String("appendfsync", fsync))
	}
	return nil
}
