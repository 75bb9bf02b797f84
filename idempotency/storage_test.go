package idempotency_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
)

// atomicMemory is a MemoryStore that says it is atomic, to test the
// middleware's rule for atomic stores without a database.
type atomicMemory struct{ *idempotency.MemoryStore }

func (atomicMemory) Atomic() bool { return true }

// post sends one keyed POST through h and returns the recorder.
func post(h http.Handler, key, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/v1/things", strings.NewReader(body))
	r.Header.Set("Idempotency-Key", key)
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestStoragePolicies(t *testing.T) {
	tests := []struct {
		storage idempotency.Storage
		atomic  bool
		status  int
		stored  bool
	}{
		{idempotency.StorageByStore, false, 201, true},
		{idempotency.StorageByStore, false, 400, true},
		{idempotency.StorageByStore, false, 409, true},
		{idempotency.StorageByStore, false, 429, false},
		{idempotency.StorageByStore, false, 500, true},
		{idempotency.StorageByStore, true, 500, false},
		{idempotency.StorageByStore, false, 503, false},
		{idempotency.StorageIETF, false, 201, true},
		{idempotency.StorageIETF, false, 404, true},
		{idempotency.StorageIETF, false, 408, false},
		{idempotency.StorageIETF, false, 409, false},
		{idempotency.StorageIETF, false, 425, false},
		{idempotency.StorageIETF, false, 429, false},
		{idempotency.StorageIETF, false, 500, false},
		{idempotency.StorageIETF, false, 502, false},
		{idempotency.StorageStripe, false, 201, true},
		{idempotency.StorageStripe, false, 409, true},
		{idempotency.StorageStripe, false, 429, false},
		{idempotency.StorageStripe, false, 500, true},
		{idempotency.StorageStripe, true, 503, true},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(int(tt.storage))+"/"+strconv.FormatBool(tt.atomic)+"/"+strconv.Itoa(tt.status), func(t *testing.T) {
			var store idempotency.Store = idempotency.NewMemoryStore()
			if tt.atomic {
				store = atomicMemory{idempotency.NewMemoryStore()}
			}
			mw, err := idempotency.New(store, idempotency.Config{Storage: tt.storage})
			require.NoError(t, err)
			runs := 0
			h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				runs++
				w.WriteHeader(tt.status)
			}))
			first := post(h, "k", `{}`)
			second := post(h, "k", `{}`)
			assert.Equal(t, tt.status, first.Code)
			assert.Equal(t, tt.status, second.Code)
			if tt.stored {
				assert.Equal(t, 1, runs, "a stored answer is replayed, never run again")
				assert.Equal(t, idempotency.StatusStored, first.Header().Get("Idempotency-Status"))
				assert.Equal(t, idempotency.StatusReplayed, second.Header().Get("Idempotency-Status"))
			} else {
				assert.Equal(t, 2, runs, "a released answer runs again")
				assert.Empty(t, first.Header().Get("Idempotency-Status"))
			}
		})
	}
}

func TestStoragePanicFollowsTheStore(t *testing.T) {
	for _, storage := range []idempotency.Storage{idempotency.StorageIETF, idempotency.StorageStripe} {
		for _, atomic := range []bool{false, true} {
			var store idempotency.Store = idempotency.NewMemoryStore()
			if atomic {
				store = atomicMemory{idempotency.NewMemoryStore()}
			}
			mw, err := idempotency.New(store, idempotency.Config{Storage: storage})
			require.NoError(t, err)
			runs := 0
			h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				runs++
				panic("boom")
			}))
			assert.Equal(t, 500, post(h, "k", `{}`).Code)
			assert.Equal(t, 500, post(h, "k", `{}`).Code)
			want := 1 // stored: the handler may have acted
			if atomic {
				want = 2 // rolled back: the retry runs again
			}
			assert.Equal(t, want, runs, "storage %d, atomic %v", storage, atomic)
		}
	}
}

func TestMismatchStatus(t *testing.T) {
	for _, status := range []int{0, 409, 422} {
		mw, err := idempotency.New(idempotency.NewMemoryStore(), idempotency.Config{MismatchStatus: status})
		require.NoError(t, err)
		h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(201) }))
		require.Equal(t, 201, post(h, "k", `{"a":1}`).Code)
		w := post(h, "k", `{"a":2}`)
		want := status
		if want == 0 {
			want = 422
		}
		assert.Equal(t, want, w.Code)
		var p struct {
			Type   string
			Status int
		}
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
		assert.Equal(t, idempotency.ProblemTypeBase+"payload-mismatch", p.Type)
		assert.Equal(t, want, p.Status)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, cfg := range map[string]idempotency.Config{
		"mismatch 400": {MismatchStatus: 400},
		"mismatch 200": {MismatchStatus: 200},
		"storage 9":    {Storage: 9},
	} {
		_, err := idempotency.New(idempotency.NewMemoryStore(), cfg)
		assert.Error(t, err, name)
	}
}

func TestMemoryStoreMaxRecords(t *testing.T) {
	ctx := context.Background()
	t0 := time.Unix(1000, 0)
	lease := t0.Add(time.Hour)
	m := idempotency.NewMemoryStore(idempotency.MaxRecords(2))
	scope := func(k string) idempotency.Scope { return idempotency.Scope{Route: "POST /x", Key: k} }
	begin := func(k string, now time.Time) idempotency.Begun {
		b, err := m.Begin(ctx, scope(k), idempotency.Fingerprint{1}, now, lease)
		require.NoError(t, err)
		return b
	}
	complete := func(b idempotency.Begun, expires time.Time) {
		require.Equal(t, idempotency.Claimed, b.State)
		require.NoError(t, b.Claim.Complete(ctx, &idempotency.Response{Status: 201}, expires))
	}

	running := begin("running", t0) // in progress: never dropped
	require.Equal(t, idempotency.Claimed, running.State)
	complete(begin("a", t0), t0.Add(time.Hour))
	assert.Equal(t, 2, m.Len())
	complete(begin("b", t0), t0.Add(time.Hour)) // full: drops a, keeps running
	assert.Equal(t, 2, m.Len())
	assert.Equal(t, idempotency.Busy, begin("running", t0).State)
	assert.Equal(t, idempotency.Replay, begin("b", t0).State)
	assert.Equal(t, 2, m.Len(), "a replay adds nothing")
	complete(begin("a", t0), t0.Add(time.Minute)) // a was dropped: claimed anew, dropping b
	assert.Equal(t, 2, m.Len())
	assert.Equal(t, idempotency.Busy, begin("running", t0).State)

	require.NoError(t, running.Claim.Release(ctx))
	assert.Equal(t, 1, m.Len())
	// Past a's expiry the next claim drops it, even with room.
	complete(begin("c", t0.Add(2*time.Minute)), t0.Add(time.Hour))
	assert.Equal(t, 1, m.Len())
	assert.Equal(t, idempotency.Replay, begin("c", t0.Add(2*time.Minute)).State)

	unbounded := idempotency.NewMemoryStore(idempotency.MaxRecords(0))
	for i := range 50 {
		b, err := unbounded.Begin(ctx, scope(strconv.Itoa(i)), idempotency.Fingerprint{1}, t0, lease)
		require.NoError(t, err)
		require.NoError(t, b.Claim.Complete(ctx, &idempotency.Response{Status: 201}, t0.Add(time.Hour)))
	}
	assert.Equal(t, 50, unbounded.Len())
}

func TestMemoryStoreMaxRecordsMany(t *testing.T) {
	ctx := context.Background()
	t0 := time.Unix(1000, 0)
	m := idempotency.NewMemoryStore(idempotency.MaxRecords(100))
	for i := range 5000 {
		b, err := m.Begin(ctx, idempotency.Scope{Key: strconv.Itoa(i)}, idempotency.Fingerprint{1}, t0, t0.Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, idempotency.Claimed, b.State)
		if i%3 == 0 {
			require.NoError(t, b.Claim.Release(ctx))
		} else {
			require.NoError(t, b.Claim.Complete(ctx, &idempotency.Response{Status: 201}, t0.Add(time.Hour)))
		}
		require.LessOrEqual(t, m.Len(), 100)
	}
	b, err := m.Begin(ctx, idempotency.Scope{Key: "4999"}, idempotency.Fingerprint{1}, t0, t0.Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, idempotency.Replay, b.State, "the newest record is kept")
}

func TestMemoryStoreMismatchFirst(t *testing.T) {
	ctx := context.Background()
	t0 := time.Unix(1000, 0)
	s := idempotency.Scope{Route: "POST /x", Key: "k"}
	for _, tt := range []struct {
		opts []idempotency.MemoryOption
		want idempotency.State
	}{
		{nil, idempotency.Busy},
		{[]idempotency.MemoryOption{idempotency.MismatchFirst()}, idempotency.Mismatch},
	} {
		m := idempotency.NewMemoryStore(tt.opts...)
		first, err := m.Begin(ctx, s, idempotency.Fingerprint{1}, t0, t0.Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, idempotency.Claimed, first.State)
		other, err := m.Begin(ctx, s, idempotency.Fingerprint{2}, t0, t0.Add(time.Minute))
		require.NoError(t, err)
		assert.Equal(t, tt.want, other.State)
		same, err := m.Begin(ctx, s, idempotency.Fingerprint{1}, t0, t0.Add(time.Minute))
		require.NoError(t, err)
		assert.Equal(t, idempotency.Busy, same.State, "the same payload waits for the run")
		taken, err := m.Begin(ctx, s, idempotency.Fingerprint{2}, t0.Add(time.Minute), t0.Add(2*time.Minute))
		require.NoError(t, err)
		assert.Equal(t, idempotency.Claimed, taken.State, "past the lease, a run that died is taken over")
	}
}

func TestJSONBody(t *testing.T) {
	tests := []struct {
		name, a, b string
		same       bool
	}{
		{"key order and numbers", `{"a":1,"b":[1.0,"x"]}`, ` {"b":[10e-1,"x"], "a":1e0} `, true},
		{"empty is {}", ``, `{}`, true},
		{"values differ", `{"a":1}`, `{"a":2}`, false},
	}
	for _, tt := range tests {
		fa, err := idempotency.JSONBody(httptest.NewRequest("POST", "/x", nil), []byte(tt.a))
		require.NoError(t, err, tt.name)
		fb, err := idempotency.JSONBody(httptest.NewRequest("POST", "/x", nil), []byte(tt.b))
		require.NoError(t, err, tt.name)
		assert.Equal(t, tt.same, string(fa) == string(fb), tt.name)
	}
	for _, bad := range []string{`{`, `[1]`, `"s"`, `{} {}`, `not json`} {
		_, err := idempotency.JSONBody(httptest.NewRequest("POST", "/x", nil), []byte(bad))
		assert.Error(t, err, bad)
	}

	mw, err := idempotency.New(idempotency.NewMemoryStore(), idempotency.Config{Fingerprint: idempotency.JSONBody})
	require.NoError(t, err)
	runs := 0
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { runs++; w.WriteHeader(201) }))
	w := post(h, "k", `{"a":`)
	assert.Equal(t, 400, w.Code)
	assert.Equal(t, 0, runs, "invalid JSON is refused before a claim")
	assert.Equal(t, 201, post(h, "k", `{"a":1}`).Code, "nothing was claimed by the refused request")
	assert.Equal(t, 1, runs)
}

func TestConfigNowIsTheRecordsClock(t *testing.T) {
	var mu sync.Mutex
	clock := time.Unix(1000, 0)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); clock = clock.Add(d) }

	mw, err := idempotency.New(idempotency.NewMemoryStore(), idempotency.Config{TTL: time.Hour, Now: now})
	require.NoError(t, err)
	runs := 0
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		d, ok := r.Context().Deadline()
		assert.True(t, ok)
		assert.WithinDuration(t, time.Now().Add(idempotency.DefaultLease), d, 10*time.Second,
			"the handler's deadline is on the real clock")
		w.WriteHeader(201)
	}))
	assert.Equal(t, idempotency.StatusStored, post(h, "k", `{}`).Header().Get("Idempotency-Status"))
	advance(59 * time.Minute)
	assert.Equal(t, idempotency.StatusReplayed, post(h, "k", `{}`).Header().Get("Idempotency-Status"))
	advance(time.Minute)
	assert.Equal(t, idempotency.StatusStored, post(h, "k", `{}`).Header().Get("Idempotency-Status"),
		"expired on the records' clock: run again")
	assert.Equal(t, 2, runs)
}

func TestConfigNowLeaseTakeover(t *testing.T) {
	var mu sync.Mutex
	clock := time.Unix(1000, 0)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	store := idempotency.NewMemoryStore()
	mw, err := idempotency.New(store, idempotency.Config{Lease: time.Minute, Now: now})
	require.NoError(t, err)
	entered, release := make(chan struct{}), make(chan struct{})
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Block") != "" {
			close(entered)
			<-release
		}
		w.WriteHeader(201)
	}))
	done := make(chan int)
	go func() {
		r := httptest.NewRequest(http.MethodPost, "/v1/things", strings.NewReader(`{}`))
		r.Header.Set("Idempotency-Key", "k")
		r.Header.Set("X-Block", "1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		done <- w.Code
	}()
	<-entered
	assert.Equal(t, http.StatusConflict, post(h, "k", `{}`).Code, "within the lease on the records' clock")
	mu.Lock()
	clock = clock.Add(time.Minute)
	mu.Unlock()
	assert.Equal(t, http.StatusCreated, post(h, "k", `{}`).Code, "past the lease on the records' clock: taken over")
	close(release)
	assert.Equal(t, http.StatusInternalServerError, <-done, "the claim taken over cannot store its answer")
}
