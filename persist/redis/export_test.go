package redis

// MaxSenders is how many pipelines of claims a Store keeps in flight.
const MaxSenders = maxSenders
