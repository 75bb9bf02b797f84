package servercrash

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/idempotency"
	"github.com/resilienthttp/resilient/internal/crashmatrix"
)

// Promise is what a store promises when the server is killed.
type Promise int

// The promises of the stores.
const (
	// Atomic (idempotency/postgres): the effect and the stored answer
	// commit together. No duplicate, nothing lost, at any kill point.
	Atomic Promise = iota + 1
	// Durable (idempotency/redis): a stored answer survives the server. An
	// operation runs twice only if a server was killed between its effect
	// and its stored answer (its claim ends at its lease, and the retry
	// runs again); nothing is lost.
	Durable
	// Volatile (MemoryStore): records die with the server. An operation
	// runs twice only if a server that applied its effect was killed
	// before the client read the answer; within one life, never; nothing
	// is lost.
	Volatile
)

func (p Promise) String() string {
	switch p {
	case Atomic:
		return "no duplicate, nothing lost, at every kill point"
	case Durable:
		return "a duplicate only for an operation killed between its effect and its stored answer; nothing lost"
	case Volatile:
		return "a duplicate only for an operation whose server died after its effect (records die with it); nothing lost"
	}
	return "unknown promise"
}

// Config is one run of the matrix.
type Config struct {
	// Name names the store in the printed line.
	Name string
	// Arg is the Opener's argument in the server processes.
	Arg string
	// Promise is what the store promises; the run checks it.
	Promise Promise
	// Kills is how many times the server is killed.
	Kills int
	// Clients is how many resilient clients run operations at once.
	// Default 2.
	Clients int
	// Effects returns, after the run, the effects that exist: operation →
	// effect ids.
	Effects func(t *testing.T) map[string][]string
}

// Kills returns how many kills a matrix run makes: IDEMPOTENCY_CRASH_KILLS
// if set, else def.
func Kills(t testing.TB, def int) int {
	if v := os.Getenv("IDEMPOTENCY_CRASH_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "IDEMPOTENCY_CRASH_KILLS")
		return n
	}
	return def
}

// Tally is what a run counted.
type Tally struct {
	Kills      map[string]int // by phase
	Ops        int            // operations completed by the clients
	Duplicates int            // effects beyond the first, over all operations
	Lost       int            // operations with no effect, or whose answer names none that exists
	Window     int            // effects of a killed life whose stored answer the journal did not record
	Reissued   int            // calls the clients re-issued under the key of an unknown outcome
}

func (t Tally) kills() int {
	n := 0
	for _, v := range t.Kills {
		n += v
	}
	return n
}

// Run runs the matrix: a server process on a free loopback port, restarted
// after each of c.Kills kills, and c.Clients clients that issue operations
// until the last kill, then finish theirs against a last life. It checks
// c.Promise, prints "server kills N, duplicates D, lost L" with the store's
// name and promise, and returns the tally.
func Run(t *testing.T, c Config) Tally {
	if c.Clients <= 0 {
		c.Clients = 2
	}
	addr := freeAddr(t)
	journal := filepath.Join(t.TempDir(), "journal")
	seed := uint64(time.Now().UnixNano())
	t.Logf("random kills drawn with seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 39))
	env := []string{addrEnv + "=" + addr, argEnv + "=" + c.Arg, journalEnv + "=" + journal}
	life := 0
	runLife := func(kill string) crashmatrix.Incarnation {
		life++
		ch := crashmatrix.Child{Env: append(append([]string(nil), env...), lifeEnv+"="+strconv.Itoa(life)), FromReady: true}
		inc := ch.KilledAt(killEnv, kill).Run(t)
		for _, l := range inc.Lines {
			require.False(t, strings.HasPrefix(l, "error"), "server life %d: %s", life, l)
		}
		return inc
	}
	cl := newClients(c.Clients, "http://"+addr)

	// Warm-up: each client's first operation is stored, the evidence that
	// lets resilient re-send a POST on the route; then the life ends.
	var stopper sync.WaitGroup
	ended := make(chan struct{})
	stopper.Go(func() {
		waitListening(addr, ended) // the warm-up must be answered at its first call
		cl.start()
		cl.warm.Wait()
		stop(addr, ended)
	})
	runLife("")
	close(ended)
	stopper.Wait()
	tally := Tally{Kills: map[string]int{}}
	cl.release()
	for i := 0; tally.kills() < c.Kills; i++ {
		require.Less(t, i, 2*c.Kills+10, "too many lives without a kill")
		phase := Phases[i%len(Phases)]
		kill := fmt.Sprintf("%s:%d", phase, 1+rng.IntN(3))
		if phase == Random {
			kill = fmt.Sprintf("%s:%d", Random, 5+rng.IntN(60))
		}
		inc := runLife(kill)
		require.True(t, inc.Killed, "life %d (kill %s) ended by itself: %v %v", life, kill, inc.Err, inc.Lines)
		if phase != Random {
			require.True(t, strings.HasPrefix(inc.Lines[len(inc.Lines)-1], "at "+phase+" "), "life %d: %v", life, inc.Lines)
		}
		tally.Kills[phase]++
	}
	cl.finish()
	ended = make(chan struct{})
	stopper.Go(func() {
		cl.done.Wait()
		stop(addr, ended)
	})
	runLife("")
	close(ended)
	stopper.Wait()
	require.Empty(t, cl.errs, "clients")

	check(t, c, cl, readStored(t, journal), life, &tally)
	line := fmt.Sprintf("server kills %d, duplicates %d, lost %d", tally.kills(), tally.Duplicates, tally.Lost)
	t.Logf("%s: %s (%v); %d operations, %d effects of killed lives without a stored answer, %d calls re-issued under their key",
		c.Name, line, tally.Kills, tally.Ops, tally.Window, tally.Reissued)
	fmt.Printf("server crash matrix, %s: %s — promise: %s\n", c.Name, line, c.Promise)
	assert.GreaterOrEqual(t, tally.kills(), c.Kills)
	return tally
}

// check is the oracle. An effect's id names the server life that applied
// it ("LIFE-SEQ"); every life but the last one, final, was killed.
func check(t *testing.T, c Config, cl *clients, stored map[opLife]bool, final int, tally *Tally) {
	t.Helper()
	effects := c.Effects(t)
	tally.Ops, tally.Reissued = len(cl.answers), cl.reissued
	for op, answer := range cl.answers {
		es := effects[op]
		if len(es) == 0 || !slices.Contains(es, answer) {
			tally.Lost++
			t.Errorf("op %s lost: effects %v, the client's answer names %q", op, es, answer)
		}
		if len(es) > 1 {
			tally.Duplicates += len(es) - 1
		}
		lives := map[string]int{}
		window := 0 // effects in a killed life that stored no answer for op
		for _, e := range es {
			life, _, _ := strings.Cut(e, "-")
			lives[life]++
			if life != strconv.Itoa(final) && !stored[opLife{op, life}] {
				window++
			}
		}
		tally.Window += window
		switch c.Promise {
		case Atomic:
			assert.Len(t, es, 1, "op %s: effects", op)
		case Durable:
			assert.LessOrEqual(t, len(es)-1, window, "op %s: %v: a second effect without a kill between effect and stored answer", op, es)
		case Volatile:
			assert.Len(t, lives, len(es), "op %s: %v: two effects in one life of the server", op, es)
		}
	}
	for op := range effects {
		_, ok := cl.answers[op]
		assert.True(t, ok, "an effect for op %s, which no client completed", op)
	}
}

// opLife is an operation in a life of the server.
type opLife struct{ op, life string }

// readStored reads the journal's "stored OP LIFE" lines.
func readStored(t *testing.T, path string) map[opLife]bool {
	t.Helper()
	stored := map[opLife]bool{}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return stored
	}
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		fs := strings.Fields(line)
		require.True(t, len(fs) == 3 && fs[0] == "stored", "journal: %q", line)
		stored[opLife{fs[1], fs[2]}] = true
	}
	return stored
}

// clients are the resilient clients of a run.
type clients struct {
	base string
	cs   []*http.Client
	warm sync.WaitGroup // each client's warm-up operation is done
	gate chan struct{}  // closed when the clients may go on after the warm-up
	done sync.WaitGroup
	stop chan struct{} // closed after the last kill: no new operations
	mu   sync.Mutex
	// guarded by mu:
	next     int
	errs     []string
	answers  map[string]string // op → the effect its final answer names
	reissued int
}

func newClients(n int, base string) *clients {
	c := &clients{base: base, gate: make(chan struct{}), stop: make(chan struct{}), answers: map[string]string{}}
	for range n {
		c.cs = append(c.cs, resilient.NewClient()) // defaults, no declaration
	}
	return c
}

func (c *clients) start() {
	for _, hc := range c.cs {
		c.warm.Add(1)
		c.done.Add(1)
		go func() {
			defer c.done.Done()
			c.op(hc, true)
			c.warm.Done()
			<-c.gate
			for {
				select {
				case <-c.stop:
					return
				default:
				}
				if !c.op(hc, false) {
					return
				}
			}
		}()
	}
}

func (c *clients) release() { close(c.gate) }
func (c *clients) finish()  { close(c.stop) }

// op runs one operation to completion: a resilient call, and while its
// outcome is unknown (resilient's attempts did not span the restart, or a
// claim's lease) the same call again under the key the first one sent, as
// an application resumes an unknown outcome. It reports false on a
// failure.
func (c *clients) op(hc *http.Client, warm bool) bool {
	c.mu.Lock()
	c.next++
	op := strconv.Itoa(c.next)
	c.mu.Unlock()
	key := ""
	var seen []string // what each call got, for the failure's message
	wait := time.Duration(0)
	for call := 0; call < 40; call++ {
		time.Sleep(wait)
		status, mark, effect, k, err := c.call(hc, op, key)
		// A 409: a claim holds the key. If its server was killed (Redis),
		// it passes on a lease after its last renewal: wait that long, as
		// the 409's Retry-After asks, not 50 ms, or an operation killed in
		// its handler a few times spends its calls on 409s.
		wait = 50 * time.Millisecond
		if status == http.StatusConflict {
			wait = serverLease
		}
		seen = append(seen, fmt.Sprintf("%d %q %v", status, mark, err))
		if key == "" {
			key = k
		}
		if err == nil && status == http.StatusCreated {
			if warm && mark != statusStored {
				return c.fail("op %s: warm-up answered %q, want stored", op, mark)
			}
			c.mu.Lock()
			c.answers[op] = effect
			c.reissued += call
			c.mu.Unlock()
			return true
		}
		if key == "" {
			return c.fail("op %s: no key sent: %v", op, err)
		}
	}
	return c.fail("op %s: not completed after 40 calls (key %s): %s", op, key, strings.Join(seen, "; "))
}

// statusStored is the Idempotency-Status of a first, stored answer.
const statusStored = idempotency.StatusStored

func (c *clients) fail(format string, args ...any) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
	return false
}

// call sends op once through hc (with key if not ""), and returns the
// answer's status, Idempotency-Status and effect, and the key sent.
func (c *clients) call(hc *http.Client, op, key string) (status int, mark, effect, sent string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rep resilient.Report
	ctx = resilient.ContextWithReport(ctx, &rep)
	if key != "" {
		ctx = resilient.ContextWithKey(ctx, key)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/ops", strings.NewReader(`{"op":`+op+`}`))
	if err != nil {
		return 0, "", "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(opHeader, op)
	resp, err := hc.Do(req)
	if err != nil {
		var re *resilient.Error
		if errors.As(err, &re) && re.Key != "" {
			return 0, "", "", re.Key, err
		}
		return 0, "", "", rep.Key, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", "", rep.Key, err
	}
	var body struct {
		Effect string `json:"effect"`
	}
	if resp.StatusCode == http.StatusCreated {
		if err := json.Unmarshal(b, &body); err != nil {
			return 0, "", "", rep.Key, fmt.Errorf("answer %q: %w", b, err)
		}
	}
	return resp.StatusCode, resp.Header.Get("Idempotency-Status"), body.Effect, rep.Key, nil
}

// stop asks the server at addr to stop (GET /stop: it prints "at stop 0"
// and is killed), retrying while it starts, until ended is closed.
func stop(addr string, ended <-chan struct{}) {
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	for range 6000 {
		if resp, err := hc.Get("http://" + addr + "/stop"); err == nil {
			resp.Body.Close()
		}
		select {
		case <-ended:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitListening waits until addr accepts connections, or ended is closed.
func waitListening(addr string, ended <-chan struct{}) {
	for range 3000 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		select {
		case <-ended:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}
