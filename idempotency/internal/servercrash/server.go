package servercrash

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/resilienthttp/resilient/idempotency"
	"github.com/resilienthttp/resilient/internal/crashmatrix"
)

// serverLease is the middleware's lease in the server: short, so that a
// claim a killed server held (Redis, memory within a life) is taken over
// soon after the restart.
const serverLease = 500 * time.Millisecond

// serve is the server process: it opens the store, listens on its address,
// prints "ready", and serves POST /v1/ops until the parent kills it. Its
// effects are named "LIFE-SEQ"; it appends "stored OP LIFE" to the journal
// once an answer is stored. GET /stop makes it stop ("at stop 0").
func serve(open Opener) int {
	fail := func(format string, args ...any) int {
		fmt.Printf("error "+format+"\n", args...)
		return 1
	}
	store, effect, closeStore, err := open(os.Getenv(argEnv))
	if err != nil {
		return fail("open: %v", err)
	}
	defer closeStore()
	journal, err := os.OpenFile(os.Getenv(journalEnv), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fail("journal: %v", err)
	}
	mw, err := idempotency.New(store, idempotency.Config{Lease: serverLease, RequireKey: true})
	if err != nil {
		return fail("middleware: %v", err)
	}
	k := newKiller(os.Getenv(killEnv))
	life := os.Getenv(lifeEnv)
	var seq atomic.Int64
	var jmu sync.Mutex
	note := func(format string, args ...any) {
		jmu.Lock()
		defer jmu.Unlock()
		fmt.Fprintf(journal, format+"\n", args...) // one write: it survives SIGKILL
	}
	op := func(ctx context.Context, w http.ResponseWriter, r *http.Request) {
		o := r.Header.Get(opHeader)
		_, _ = io.Copy(io.Discard, r.Body)
		k.at(InHandler, o)
		id := fmt.Sprintf("%s-%d", life, seq.Add(1))
		if err := effect(ctx, o, id); err != nil {
			http.Error(w, "effect: "+err.Error(), http.StatusInternalServerError)
			return
		}
		k.at(AfterEffect, o)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"op":%q,"effect":%q}`, o, id)
	}
	handler := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { op(r.Context(), w, r) }))
	mux := http.NewServeMux()
	mux.Handle("POST /v1/ops", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := r.Header.Get(opHeader)
		k.at(BeforeHandler, o)
		handler.ServeHTTP(&storedWatch{ResponseWriter: w, stored: func() {
			note("stored %s %s", o, life)
			k.at(AfterStored, o)
		}}, r)
	}))
	mux.HandleFunc("GET /stop", func(http.ResponseWriter, *http.Request) { crashmatrix.At("stop", 0) })

	l, err := listen(os.Getenv(addrEnv))
	if err != nil {
		return fail("listen: %v", err)
	}
	srv := &http.Server{Handler: mux, ErrorLog: log.New(io.Discard, "", 0)}
	fmt.Println("ready")
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail("serve: %v", err)
	}
	return 0
}

// listen listens on addr, retrying while the previous life's socket is
// still being torn down.
func listen(addr string) (net.Listener, error) {
	var err error
	for range 100 {
		var l net.Listener
		if l, err = net.Listen("tcp", addr); err == nil {
			return l, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, err
}

// storedWatch calls stored when the middleware writes an answer it stored
// (Idempotency-Status: stored), before the answer goes out.
type storedWatch struct {
	http.ResponseWriter
	stored func()
}

func (s *storedWatch) WriteHeader(code int) {
	if s.Header().Get("Idempotency-Status") == idempotency.StatusStored {
		s.stored()
	}
	s.ResponseWriter.WriteHeader(code)
}

// killer stops the server at the K-th request that reaches its phase.
type killer struct {
	phase string
	k     int64
	n     atomic.Int64
}

func newKiller(kill string) *killer {
	phase, k, _ := strings.Cut(kill, ":")
	n, _ := strconv.ParseInt(k, 10, 64)
	return &killer{phase: phase, k: n}
}

// at stops the process (crashmatrix.At) if this is the K-th request at
// phase.
func (k *killer) at(phase, op string) {
	if phase == k.phase && k.n.Add(1) == k.k {
		crashmatrix.At(phase, op)
	}
}
