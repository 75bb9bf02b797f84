package pushback

// A fixed seed (Config.Seed) replaces the middleware's two random sources:
// maphash's seed in the key table (seededHash) and math/rand/v2 in the
// Retry-After draws (answers.pickRetryAfter, with mix64).

// seededHash returns a 64-bit hash of key under seed, the same in every
// process (maphash's seeds cannot be set): FNV-1a of key's bytes from an
// offset basis mixed with seed, then mix64, so that the slot (low bits) and
// the tag (high bits) both depend on every byte.
func seededHash(seed uint64, key string) uint64 {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := offset64 ^ seed
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= prime64
	}
	return mix64(h ^ seed)
}

// mix64 is the finalizer of SplitMix64 (Steele, Lea and Flood, 2014): a
// bijection of 64-bit words in which every output bit depends on every
// input bit.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
