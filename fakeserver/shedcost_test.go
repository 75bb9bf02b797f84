package fakeserver_test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/resilienthttp/resilient/fakeserver"
)

// TestShedCostIsPaidByTheNextAdmittedRequest checks the shed-cost model in
// simulated time: one slot of 100 ms; a request shed while the slot is busy
// adds ShedCost × 100 ms to the time the next admitted request holds it.
func TestShedCostIsPaidByTheNextAdmittedRequest(t *testing.T) {
	tests := []struct {
		shedCost float64
		want     time.Duration // how long the request after the shed one takes
	}{
		{0, 100 * time.Millisecond},
		{0.1, 110 * time.Millisecond},
		{0.5, 150 * time.Millisecond},
		{1, 200 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run("", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := fakeserver.NewUnstarted(fakeserver.WithCapacity(fakeserver.Capacity{
					MaxConcurrent: 1, ServiceTime: fakeserver.Duration(100 * time.Millisecond),
					RetryAfter: fakeserver.Duration(time.Second), ShedCost: tt.shedCost,
				}))
				defer s.Close()
				c := &http.Client{Transport: s.Transport()}
				done := make(chan struct{})
				go func() {
					defer close(done)
					assert.Equal(t, http.StatusCreated, mustDo(t, c, inProcessURL, req{}).status)
				}()
				time.Sleep(10 * time.Millisecond) // the first holds the slot
				shed := mustDo(t, c, inProcessURL, req{})
				assert.Equal(t, http.StatusServiceUnavailable, shed.status)
				assert.Equal(t, "1", shed.header.Get("Retry-After"))
				<-done
				start := time.Now()
				assert.Equal(t, http.StatusCreated, mustDo(t, c, inProcessURL, req{}).status)
				assert.Equal(t, tt.want, time.Since(start))
				st := s.Stats()
				assert.EqualValues(t, 2, st.Admitted)
				assert.EqualValues(t, 1, st.CapacityRejections)
			})
		})
	}
}
