package redis_test

import (
	goredis "github.com/redis/go-redis/v9"

	"github.com/resilienthttp/resilient/persist/redis"
)

// Stores in many processes share keys through one Redis.
func ExampleNew() {
	client := goredis.NewClient(&goredis.Options{Addr: "localhost:6379"})
	defer client.Close()
	store := redis.New(client, redis.WithPrefix("payments:op:"))
	_ = store // pass it to resilient.WithStore
}
