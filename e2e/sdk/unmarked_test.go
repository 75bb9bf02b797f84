package sdk

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
)

// uclients are the unmarked matrix's clients, in the README's order.
var uclients = []uclient{openSearch, vaultKV, azureBlob, minioPut, goOpenAI, handLoop}

// documented is the setup the README documents for a client whose loop
// sends no mark: WithOuterRetries(true) for the SDK's host.
var documented = wrapped("NewClient(WithOuterRetries(true, host))", resilient.WithOuterRetries(true, "svc.test"))

// maxTransportAttempts is the Transport's default attempts per call.
const maxTransportAttempts = 4

// TestUnmarkedSDKMatrix runs each unmarked client and scenario alone, over
// resilient.NewClient() with defaults (fresh, and warmed: one failing call
// from the same place first) and over the documented setup, and checks:
//
//   - warmed default arm, for a client that retries on its own: no more
//     attempts or effects than alone, no fewer successes, and no wait of
//     the Transport's own above 1 s past the server's delays (virtual time
//     spent inside RoundTrip: the server answers at once); for a client
//     that retries nothing:
//     no more effects, no fewer successes;
//   - fresh default arm: attempts ≤ alone + the Transport's retries of one
//     call (maxTransportAttempts − 1), effects ≤ alone, successes ≥ alone;
//   - documented arm: attempts ≤ alone, effects ≤ alone, successes ≥ alone,
//     no wait of the Transport's own but what is left of the server's
//     delays;
//   - wrapped arms: no try sooner than the server's delay asked;
//   - every request's body is the one its length and signature announce,
//     and every signed request verifies, in every arm.
//
// With -v it prints the README's table.
func TestUnmarkedSDKMatrix(t *testing.T) {
	var rows []string
	for _, c := range uclients {
		for _, sc := range uscenarios {
			t.Run(c.name+"/"+sc.name, func(t *testing.T) {
				a := urun(t, c, alone, sc, false)
				aw := urun(t, c, alone, sc, true)
				f := urun(t, c, wrapped("NewClient()"), sc, false)
				w := urun(t, c, wrapped("NewClient()"), sc, true)
				d := urun(t, c, documented, sc, false)
				rows = append(rows, fmt.Sprintf("| %s | %s | %d → %d → %d → **%d** | %d → %d → %d → **%d** | %s → %s → %s → **%s** | %s → %s → %s → **%s** |",
					c.name, sc.name, a.attempts, f.attempts, w.attempts, d.attempts, a.effects, f.effects, w.effects, d.effects,
					okMark(a.ok), okMark(f.ok), okMark(w.ok), okMark(d.ok), secs(a.took), secs(f.took), secs(w.took), secs(d.took)))
				for name, r := range map[string]uresult{"alone": a, "alone warmed": aw, "NewClient()": f, "NewClient() warmed": w, "documented": d} {
					assert.Empty(t, r.badSigs, "%s: signatures the server rejects", name)
				}
				// Warmed: the same alone run, warmed, is the reference (a
				// warm-up changes nothing for the SDK alone but its clock).
				assert.Equal(t, a.attempts, aw.attempts, "alone, warmed or not")
				assert.LessOrEqual(t, w.effects, aw.effects, "warmed: effects")
				assert.GreaterOrEqual(t, btoi(w.ok), btoi(aw.ok), "warmed: successes")
				for name, r := range map[string]uresult{"NewClient()": f, "NewClient() warmed": w, "documented": d} {
					assert.Empty(t, r.early, "%s: tries sooner than the server asked", name)
				}
				if c.loops {
					assert.LessOrEqual(t, w.attempts, aw.attempts, "warmed: attempts on the wire")
					assert.LessOrEqual(t, w.inTransport, w.asked+time.Second, "warmed: waits of the Transport's own, past the server's delays")
				} else {
					assert.LessOrEqual(t, w.attempts, a.attempts*maxTransportAttempts, "warmed: the Transport's retries only")
				}
				assert.LessOrEqual(t, f.attempts, a.attempts+maxTransportAttempts-1, "fresh: the first-call bound")
				assert.LessOrEqual(t, f.effects, a.effects, "fresh: effects")
				assert.GreaterOrEqual(t, btoi(f.ok), btoi(a.ok), "fresh: successes")
				if c.loops {
					assert.LessOrEqual(t, d.attempts, a.attempts, "documented: attempts")
					assert.LessOrEqual(t, d.inTransport, d.asked, "documented: waits of the Transport's own, past the server's delays")
				}
				assert.LessOrEqual(t, d.effects, a.effects, "documented: effects")
				assert.GreaterOrEqual(t, btoi(d.ok), btoi(a.ok), "documented: successes")
			})
		}
	}
	if testing.Verbose() {
		fmt.Fprintln(os.Stdout, "| SDK call | server | attempts | effects | call succeeded | time (virtual) |")
		fmt.Fprintln(os.Stdout, "|---|---|---|---|---|---|")
		fmt.Fprintln(os.Stdout, "| | | alone → NewClient() fresh → warmed → **documented** | alone → fresh → warmed → **doc.** | alone → fresh → warmed → **doc.** | alone → fresh → warmed → **doc.** |")
		fmt.Fprintln(os.Stdout, strings.Join(rows, "\n"))
	}
}

func okMark(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
