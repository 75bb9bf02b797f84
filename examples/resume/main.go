// Command resume shows an operation that survives a crash of the client.
//
// The program plays both roles. As the parent it starts the fake payments API
// (package fakeserver) on 127.0.0.1, scripted so that the first refund is
// committed but its response lost, and the retry hangs. It then runs itself as
// a child client process that issues the refund as the named operation
// "refund:ch_123", with its key in a bolt file — and kills that child with
// SIGKILL while it is stuck. A second child, with the same bolt file, finds
// the operation pending, sends the same key, and gets the server's stored
// answer: one refund, not two.
//
//	go run ./examples/resume
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/examples/internal/selfexec"
	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/resilienthttp/resilient/persist/bolt"
)

const (
	childEnv = "RESUME_CHILD_URL"
	dbEnv    = "RESUME_DB"
	op       = "refund:ch_123"
)

func main() {
	ctx := context.Background()
	selfexec.Main(childEnv,
		func(url string) error { return child(ctx, os.Stdout, url, os.Getenv(dbEnv)) },
		func(exe string) error { return run(ctx, os.Stdout, exe) })
}

// run is the parent: it starts the server and two client processes, the
// first of which it kills. exe is the program to run as the client.
func run(ctx context.Context, w io.Writer, exe string, args ...string) error {
	srv := fakeserver.New(fakeserver.WithRoute(fakeserver.Route{
		Match: "POST /v1/refunds",
		Script: []fakeserver.Fault{
			{Kind: fakeserver.FaultLostResponse}, // committed, answer lost
			{Kind: fakeserver.FaultHang},         // the retry hangs: the client is stuck
		},
	}))
	defer srv.Close()
	dir, err := os.MkdirTemp("", "resume")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db := filepath.Join(dir, "pending.db")
	start := func() (*selfexec.Process, error) {
		return selfexec.Start(ctx, exe, args, childEnv+"="+srv.URL, dbEnv+"="+db)
	}

	first, err := start()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(20 * time.Second)
	for srv.Stats().Requests < 2 { // the lost response, then the hanging retry
		if time.Now().After(deadline) {
			first.Kill()
			return errors.New("the first client never retried")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for first.Lines.Scan() {
		fmt.Fprintln(w, "client 1:", first.Lines.Text())
		if strings.HasPrefix(first.Lines.Text(), "sending") {
			break
		}
	}
	if err := first.Kill(); err != nil { // SIGKILL: no cleanup runs
		return err
	}
	fmt.Fprintf(w, "client 1: killed (server has %d effect(s))\n", srv.TotalEffects())

	second, err := start()
	if err != nil {
		return err
	}
	for second.Lines.Scan() {
		fmt.Fprintln(w, "client 2:", second.Lines.Text())
	}
	if err := second.Wait(); err != nil {
		return fmt.Errorf("second client: %w", err)
	}
	fmt.Fprintf(w, "server: %d effect(s), %d duplicate(s)\n", srv.TotalEffects(), srv.Stats().DuplicateEffects)
	if srv.TotalEffects() != 1 {
		return fmt.Errorf("expected exactly one effect, got %d", srv.TotalEffects())
	}
	return nil
}

// child is a client process: it issues the refund as a named operation whose
// key lives in the bolt file db.
func child(ctx context.Context, w io.Writer, url, db string) error {
	store, err := bolt.Open(db)
	if err != nil {
		return err
	}
	defer store.Close()
	if pending, err := store.Pending(ctx); err == nil && len(pending) > 0 {
		fmt.Fprintf(w, "found pending operation %s with key %s\n", pending[0].Operation, pending[0].Key)
	}
	client := resilient.NewClient(resilient.WithStore(store),
		resilient.WithBackoff(resilient.Exponential(20*time.Millisecond, 100*time.Millisecond)))
	rep := new(resilient.Report)
	ctx = resilient.ContextWithReport(resilient.ContextWithOperation(ctx, op), rep)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/refunds",
		strings.NewReader(`{"charge":"ch_123","amount":1000}`))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "sending %s\n", op)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	fmt.Fprintf(w, "%d with key %s, Idempotency-Status: %s\n", resp.StatusCode, rep.Key, resp.Header.Get("Idempotency-Status"))
	return nil
}
