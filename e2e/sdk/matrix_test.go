package sdk

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// clients are the rows' clients, in the README's order.
var clients = []client{openaiGo, openaiOwnKey, dynamoDB, stripeGo, plainLoop}

// TestSDKMatrix runs every client and scenario alone, over
// resilient.NewClient() (no option: the marks decide) and over the
// recommended setup, and checks that the recommended setup is never worse
// than the SDK alone: no more attempts or effects, no fewer successes, no
// key on two calls, one key per call, the SDK's count in Retry-Attempt,
// no wait added to the SDK's own but the server's delay, and no try sooner
// than that delay. Every request's body and signature verify (checkBody,
// checkSigV4). With -v it prints the README's table.
func TestSDKMatrix(t *testing.T) {
	var rows []string
	for _, c := range clients {
		rec := recommended[c.name].setup()
		for _, sc := range scenarios {
			t.Run(c.name+"/"+sc.name, func(t *testing.T) {
				a := run(t, c, alone, sc)
				d := run(t, c, wrapped("NewClient()"), sc)
				r := run(t, c, rec, sc)
				rows = append(rows, fmt.Sprintf("| %s | %s | %d → %d → **%d** | %d → %d → **%d** | %d/%d → %d/%d → **%d/%d** | %s → %s → **%s** | %s → **%s** |",
					c.name, sc.name, a.attempts, d.attempts, r.attempts, a.effects, d.effects, r.effects,
					a.ok, max(sc.calls, 1), d.ok, max(sc.calls, 1), r.ok, max(sc.calls, 1),
					secs(a.took), secs(d.took), secs(r.took), keys(d), keys(r)))
				for name, res := range map[string]result{"alone": a, "NewClient()": d, "recommended": r} {
					assert.Empty(t, res.bad, "%s: requests the server rejects", name)
				}
				assert.LessOrEqual(t, r.attempts, a.attempts, "attempts on the wire")
				assert.LessOrEqual(t, r.effects, a.effects, "effects")
				assert.GreaterOrEqual(t, r.ok, a.ok, "successful calls")
				assert.False(t, r.sharedKey, "a key sent by two calls")
				assert.False(t, d.sharedKey, "a key sent by two calls (NewClient())")
				if c.name != plainLoop.name && sc.calls <= 1 {
					// Retry-Attempt counts as the SDK does: absent on its
					// first attempt, then 1, 2, …
					for i, v := range r.attempt {
						want := ""
						if i > 0 {
							want = fmt.Sprint(i)
						}
						assert.Equal(t, want, v, "Retry-Attempt of the SDK's attempt %d", i)
					}
					// One key per call. (Two identical calls at once, or
					// a loop without marks, may get a key per attempt: a
					// retry that cannot be told apart gets a new key.)
					for i, n := range r.keys {
						assert.LessOrEqual(t, n, 1, "keys on the wire for call %d", i)
					}
				}
				// Time: the SDKs' sleeps are jittered, so two runs' times
				// differ by their draws; what the Transport adds is
				// exact: the server answers at once, so any virtual time
				// spent in RoundTrip is a wait of the Transport's. The
				// one it adds is what is left of the server's delay: no
				// try leaves sooner than the server asked, and none later
				// than that plus the SDK's own backoff.
				assert.Empty(t, d.early, "NewClient(): tries sooner than the server asked")
				assert.Empty(t, r.early, "tries sooner than the server asked")
				assert.LessOrEqual(t, r.inTransport, r.asked, "time added by the Transport, past the server's delays")
			})
		}
	}
	if testing.Verbose() {
		fmt.Fprintln(os.Stdout, "| SDK | server | attempts | effects | calls succeeded | time (virtual) | keys per call |")
		fmt.Fprintln(os.Stdout, "|---|---|---|---|---|---|---|")
		fmt.Fprintln(os.Stdout, "| | | alone → NewClient() → **recommended** | alone → NewClient() → **rec.** | alone → NewClient() → **rec.** | alone → NewClient() → **rec.** | NewClient() → **rec.** |")
		fmt.Fprintln(os.Stdout, strings.Join(rows, "\n"))
	}
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func keys(r result) string {
	parts := make([]string, len(r.keys))
	for i, n := range r.keys {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, ", ")
}
