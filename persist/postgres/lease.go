package postgres

import "context"

// leaseKey is the context key of a lease generation.
type leaseKey struct{}

// firstGeneration is the lease generation of a record that no Resumer has
// taken: the one ClaimTx and a first Claim give, and the one a context
// without a generation holds.
const firstGeneration = int64(1)

// contextWithLease returns a copy of ctx holding the lease generation gen:
// the Store's Claim and Finish made with it act as that generation's holder.
func contextWithLease(ctx context.Context, gen int64) context.Context {
	return context.WithValue(ctx, leaseKey{}, gen)
}

// leaseFromContext returns the lease generation ctx holds, firstGeneration
// if none.
func leaseFromContext(ctx context.Context) int64 {
	if gen, ok := ctx.Value(leaseKey{}).(int64); ok {
		return gen
	}
	return firstGeneration
}
