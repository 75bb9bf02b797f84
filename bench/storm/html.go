package storm

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// WriteHTML writes dir/index.html: one self-contained page (no file or
// network reference) with the headline, the method in a paragraph, the PNG
// plots among files embedded as data URLs, a table of every result and of
// the tail scenario, and the definition of every column. A script in the
// page checks that every image decoded and writes the count into the
// element #render-check (bench/render-check.sh reads it). It returns the
// file's path.
func WriteHTML(dir string, s Summary, files []string) (string, error) {
	var head bytes.Buffer
	if err := WriteHeadline(&head, s); err != nil {
		return "", err
	}
	type img struct {
		Name string
		Src  template.URL
	}
	var imgs []img
	for _, f := range files {
		if !strings.HasSuffix(f, ".png") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		imgs = append(imgs, img{filepath.Base(f), template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(b))})
	}
	var rows [][]string
	for _, r := range s.Results {
		load := r.WarmLoad
		if r.OutageLoad != nil {
			load = r.OutageLoad
		}
		rows = append(rows, []string{scenarioTitle(r, s.Config), r.Scale, r.Strategy, yesNo(r.Keyed), strconv.Itoa(r.Ops),
			strconv.FormatInt(r.ServerRequests, 10), num(r, r.Amplification, 2), numPtr(r, load, 2), pct(r, r.SuccessRate),
			vsNone(r), harm(r), dupText(r), num(r, r.P50Ms, 0), num(r, r.P99Ms, 0), recoveryText(r), num(r, r.GoodputPerS, 0),
			strconv.FormatInt(r.Shed, 10), yesNo(r.Harmful), yesNo(r.Disturbed), yesNo(r.Invalid)})
	}
	var tail [][]string
	for _, r := range s.Tail {
		tail = append(tail, []string{r.Scale, r.Strategy, strconv.Itoa(r.Ops), strconv.FormatInt(r.ServerRequests, 10),
			fmt.Sprintf("%.2f", r.Load), fmt.Sprintf("%.1f %%", 100*r.SuccessRate), fmt.Sprintf("%.0f", r.P50Ms),
			fmt.Sprintf("%.0f", r.P99Ms), fmt.Sprintf("%.0f", r.P999Ms), fmt.Sprintf("%.2f×", r.P99Gain), yesNo(r.Disturbed), yesNo(r.Invalid)})
	}
	var strategies [][2]string
	for _, st := range append(Strategies(), s.Config.Own...) {
		for _, r := range s.Results {
			if r.Strategy == st.Name {
				strategies = append(strategies, [2]string{st.Name, st.Description})
				break
			}
		}
	}
	for _, st := range append(append([]TailStrategy(nil), tailStrategies...), s.Config.Tail.Own...) {
		for _, r := range s.Tail {
			if r.Strategy == st.Name && st.Name != "none" && st.Name != "resilient" {
				strategies = append(strategies, [2]string{st.Name + " (tail)", st.Description})
				break
			}
		}
	}
	data := map[string]any{
		"Headline":   head.String(),
		"Method":     s.method(),
		"Images":     imgs,
		"Columns":    resultColumns,
		"Rows":       rows,
		"TailCols":   tailColumns,
		"Tail":       tail,
		"Strategies": strategies,
	}
	var b bytes.Buffer
	if err := htmlPage.Execute(&b, data); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "index.html")
	return path, os.WriteFile(path, b.Bytes(), 0o644)
}

func dupText(r Result) string {
	if r.NoLedger {
		return "not countable"
	}
	return strconv.Itoa(r.Duplicates)
}

// method describes in a paragraph how the results were made.
func (s Summary) method() string {
	c := s.Config
	var engine string
	switch s.Engine {
	case EngineVirtual:
		engine = "in virtual time: each run is a testing/synctest bubble whose clock moves only when every goroutine " +
			"in it is blocked, so no operation starts late and the results do not depend on the machine's load (jitter " +
			"is random and goroutines waking at one instant run in any order, so a rerun differs by a few tenths of a point). " +
			"The clients are the real code (resilient's Transport, go-retryablehttp, failsafe-go); the server is the " +
			"fakeserver package called in-process, without sockets: net/http's connection pool, its own silent re-sends " +
			"and the network are left out (-engine sockets puts them back, at the price of results a busy machine can disturb)."
	case EngineSockets:
		engine = "in real time over loopback sockets, with net/http's connection pool and re-sends; the load generator " +
			"records every operation it started more than " + LateThreshold.String() + " late, and a run with more than " +
			strconv.FormatFloat(100*c.MaxDisturbed, 'g', -1, 64) + " % of them is invalid."
	default:
		engine = "in real time against " + s.Target + ", one run after the other, with one client (one Transport) " +
			"per run; where the target serves the fakeserver's admin API the faults were scripted through it and the " +
			"requests and duplicates counted by its ledger, elsewhere the load is what the clients sent and duplicates are not countable."
	}
	return fmt.Sprintf("Every strategy met exactly the same load: the same arrival times (open loop, %d clients × %g operations/s "+
		"from seed %d), each operation a keyed POST (a GET in the tail scenario) bounded by a %v deadline, against a fresh server "+
		"that draws each attempt's fate from the operation and the attempt number, so the k-th attempt of an operation meets the "+
		"same fate whatever the strategy. The runs were made %s Harm compares, operation by operation, with the strategy none "+
		"(one attempt), for information; a strategy is flagged harmful, never when it succeeded more than none, when its success is more "+
		"than %g points below none's or, under overload, its goodput during the load more than %g %% below none's (at the precision "+
		"printed). Over seeds (-seeds N), harm is success below none's by more than twice the standard error of the paired "+
		"differences, or goodput below by that share. Rerun with the command at the top of the headline.",
		c.Clients, c.Rate, c.Seed, c.OpTimeout, engine, harmPoints, 100*harmShare)
}

// resultColumns and tailColumns name and define the columns of the HTML
// tables, in order.
var resultColumns = [][2]string{
	{"scenario", "what the server did: steady (a share p of requests fail, 503, after taking a capacity slot; a few responses are lost after the effect), outage (every request fails in a window), overload (offered load beyond the server's capacity), target (a -target as it is)"},
	{"scale", "per-client: each client has its own Transport (its own retry state); shared: one Transport for all clients"},
	{"strategy", "the client and its retry policy (defined below)"},
	{"keyed", "every attempt of an operation carries the same Idempotency-Key"},
	{"ops", "logical operations of the load"},
	{"server requests", "requests the server saw (every attempt, and any re-send net/http made on its own)"},
	{"amplification", "server requests ÷ ops"},
	{"load", "server requests per operation once warmed up (steady, overload), or during the outage window (outage)"},
	{"success", "share of operations that got a success (201; 2xx on a -target)"},
	{"vs none", "success minus none's, in percentage points"},
	{"harm", "operations none completed and this strategy failed"},
	{"duplicates", "effects beyond the first per operation in the server's ledger"},
	{"p50 ms, p99 ms", "percentiles of the caller's latency: until its final answer, retries and waits included"},
	{"recovery s", "seconds from the end of the outage until goodput is back to 95 % of its level before it"},
	{"goodput/s", "operations that succeeded per second during the load, after the warm-up"},
	{"shed", "requests the server shed (503) for lack of capacity"},
	{"harmful", "vs none below −0.5 points, or harm above 0.5 % of ops (overload: goodput below 99.5 % of none's)"},
	{"disturbed", "the machine, not the strategy, shaped part of the run: operations started late, accept errors, or an overrun"},
	{"invalid", "disturbed beyond the threshold: its numbers are not to be read (virtual runs cannot be disturbed)"},
}

var tailColumns = [][2]string{
	{"scale", "as above"},
	{"strategy", "as above; the hedging strategies send a second copy of a slow GET"},
	{"ops", "GETs of the load"},
	{"server requests", "GETs the server saw"},
	{"load", "server requests ÷ ops"},
	{"success", "share of GETs answered 200"},
	{"p50, p99, p99.9 ms", "percentiles of the caller's latency"},
	{"p99 gain", "resilient's p99 without hedging ÷ this p99"},
	{"disturbed, invalid", "as above"},
}

var htmlPage = template.Must(template.New("index").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>storm: what retries do to a struggling server</title>
<style>
body{font-family:sans-serif;margin:2em;max-width:1400px;color:#222;background:#fff}
pre{background:#f4f4f4;padding:1em;white-space:pre-wrap;font-size:13px}
table{border-collapse:collapse;font-size:12px;margin:1em 0}
th,td{border:1px solid #ccc;padding:2px 6px;text-align:right}
th{background:#e8eef7}td:nth-child(-n+3){text-align:left}
img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}
dt{font-weight:bold}#render-check{color:#777;font-size:11px}
</style></head><body>
<h1>storm: what retries do to a struggling server</h1>
<h2>Headline</h2>
<pre>{{.Headline}}</pre>
<h2>Method</h2>
<p>{{.Method}}</p>
<h2>Plots</h2>
{{range .Images}}<figure><img src="{{.Src}}" alt="{{.Name}}"><figcaption>{{.Name}}</figcaption></figure>
{{else}}<p>No plot for these scenarios.</p>{{end}}
{{if .Rows}}<h2>Every result</h2>
<table><tr>{{range .Columns}}<th>{{index . 0}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>{{end}}
{{if .Tail}}<h2>Tail scenario</h2>
<table><tr>{{range .TailCols}}<th>{{index . 0}}</th>{{end}}</tr>
{{range .Tail}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>{{end}}
<h2>Columns</h2>
<dl>{{range .Columns}}<dt>{{index . 0}}</dt><dd>{{index . 1}}</dd>{{end}}</dl>
{{if .Tail}}<h3>Tail scenario</h3><dl>{{range .TailCols}}<dt>{{index . 0}}</dt><dd>{{index . 1}}</dd>{{end}}</dl>{{end}}
<h2>Strategies</h2>
<dl>{{range .Strategies}}<dt>{{index . 0}}</dt><dd>{{index . 1}}</dd>{{end}}</dl>
<p id="render-check">images: not checked (scripts off)</p>
<script>
window.addEventListener("load", function () {
  var imgs = document.images, ok = 0;
  for (var i = 0; i < imgs.length; i++) if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++;
  document.getElementById("render-check").textContent = "images decoded: " + ok + "/" + imgs.length;
});
</script>
</body></html>
`))
