package storm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/resilienthttp/resilient"
)

// PolicyFile is the JSON of a policy file (-policy FILE): a team's own
// resilient configurations, each run as a strategy of the storm (and of the
// tail scenario) beside none, the peers and resilient's defaults. Every
// field left out keeps resilient's default; unknown fields are an error.
//
//	{"policies": [
//	  {"name": "ours", "max_attempts": 3,
//	   "backoff": {"kind": "full-jitter", "base": "50ms", "max": "1s"},
//	   "retry_control": {"kind": "budget", "ratio": 0.1},
//	   "hedging": {"delay": "30ms"},
//	   "attempt_timeout": "500ms"}
//	]}
type PolicyFile struct {
	Policies []Policy `json:"policies"`
}

// Policy is one configuration of resilient's Transport, in terms of its
// options.
type Policy struct {
	// Name names the strategy in tables; it must not be a built-in
	// strategy's name.
	Name string `json:"name"`
	// MaxAttempts is WithMaxAttempts (total attempts, first included).
	MaxAttempts int `json:"max_attempts,omitempty"`
	// Backoff is WithBackoff.
	Backoff *PolicyBackoff `json:"backoff,omitempty"`
	// RetryControl chooses the retry control of WithRetryControl:
	// resilient.RetryTokens, resilient.RetryBudget or none.
	RetryControl *PolicyRetryControl `json:"retry_control,omitempty"`
	// Breaker adds a resilient.CircuitBreaker (same fields) to the retry
	// control (the retry tokens when RetryControl is not set).
	Breaker *PolicyBreaker `json:"breaker,omitempty"`
	// Hedging is WithHedging (fields as in resilient.HedgingConfig).
	Hedging *PolicyHedging `json:"hedging,omitempty"`
	// AttemptTimeout is WithAttemptTimeout; RetryAfterMax is
	// WithRetryAfterMax.
	AttemptTimeout Duration `json:"attempt_timeout,omitempty"`
	RetryAfterMax  Duration `json:"retry_after_max,omitempty"`
}

// PolicyBackoff is a Backoff: Kind is "full-jitter", "equal-jitter",
// "decorrelated-jitter" or "exponential", with its base and max.
type PolicyBackoff struct {
	Kind string   `json:"kind"`
	Base Duration `json:"base"`
	Max  Duration `json:"max"`
}

// PolicyRetryControl is the retry control: Kind "tokens" (fields of
// resilient.RetryTokens), "budget" (fields of resilient.RetryBudget)
// or "none". Zero fields keep the defaults.
type PolicyRetryControl struct {
	Kind         string   `json:"kind"`
	Refill       float64  `json:"refill,omitempty"`
	CapRatio     float64  `json:"cap_ratio,omitempty"`
	MinTokens    float64  `json:"min_tokens,omitempty"`
	Ratio        float64  `json:"ratio,omitempty"`
	MinPerSecond float64  `json:"min_per_second,omitempty"`
	Window       Duration `json:"window,omitempty"`
}

// PolicyBreaker is resilient.CircuitBreaker.
type PolicyBreaker struct {
	FailureRatio   float64  `json:"failure_ratio,omitempty"`
	MinRequests    uint32   `json:"min_requests,omitempty"`
	Window         Duration `json:"window,omitempty"`
	OpenTimeout    Duration `json:"open_timeout,omitempty"`
	HalfOpenProbes uint32   `json:"half_open_probes,omitempty"`
	RetriesOnly    bool     `json:"retries_only,omitempty"`
}

// PolicyHedging is resilient.HedgingConfig.
type PolicyHedging struct {
	Delay     Duration `json:"delay,omitempty"`
	Quantile  float64  `json:"quantile,omitempty"`
	MaxHedges int      `json:"max_hedges,omitempty"`
}

// Duration is a time.Duration written in JSON as Go writes it ("250ms").
type Duration time.Duration

// UnmarshalJSON reads a duration string such as "250ms".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string such as \"250ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// ReadPolicies reads a policy file and returns its policies as storm
// strategies and as tail strategies, in file order.
func ReadPolicies(r io.Reader) ([]Strategy, []TailStrategy, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var f PolicyFile
	if err := dec.Decode(&f); err != nil {
		return nil, nil, fmt.Errorf("storm: policy file: %w", err)
	}
	if len(f.Policies) == 0 {
		return nil, nil, errors.New("storm: policy file: no policy")
	}
	var out []Strategy
	var tail []TailStrategy
	seen := map[string]bool{}
	for _, p := range f.Policies {
		opts, desc, err := p.Options()
		if err != nil {
			return nil, nil, fmt.Errorf("storm: policy %q: %w", p.Name, err)
		}
		_, builtin := lookupStrategy(p.Name)
		switch {
		case p.Name == "" || strings.ContainsAny(p.Name, ", \t"):
			return nil, nil, fmt.Errorf("storm: policy %q: a name without spaces or commas is required", p.Name)
		case builtin || seen[p.Name]:
			return nil, nil, fmt.Errorf("storm: policy %q: the name is taken", p.Name)
		}
		seen[p.Name] = true
		attempts := p.MaxAttempts
		if attempts == 0 {
			attempts = 4 // resilient's default
		}
		newClient := func(base http.RoundTripper) *http.Client {
			if p.Backoff == nil {
				return resilientClient(base, opts...)
			}
			bo, _ := p.Backoff.value() // checked by Options
			return resilientClient(base, append(slices.Clone(opts), resilient.WithBackoff(jitter(base, bo)))...)
		}
		out = append(out, Strategy{Name: p.Name, Description: "your policy: " + desc, Keyed: true, MaxAttempts: attempts,
			NewClient: newClient})
		tail = append(tail, TailStrategy{Name: p.Name, Description: "your policy: " + desc,
			NewClient: func(base http.RoundTripper, _ TailConfig) *http.Client { return newClient(base) }})
	}
	return out, tail, nil
}

// ReadPolicyFile is ReadPolicies on the file at path.
func ReadPolicyFile(path string) ([]Strategy, []TailStrategy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("storm: policy file: %w", err)
	}
	return ReadPolicies(bytes.NewReader(b))
}

// value returns b as a resilient.Backoff.
func (b *PolicyBackoff) value() (resilient.Backoff, error) {
	base, mx := time.Duration(b.Base), time.Duration(b.Max)
	if base <= 0 || mx < base {
		return nil, errors.New("backoff: want 0 < base ≤ max")
	}
	switch b.Kind {
	case "full-jitter":
		return resilient.FullJitter(base, mx), nil
	case "equal-jitter":
		return resilient.EqualJitter(base, mx), nil
	case "decorrelated-jitter":
		return resilient.DecorrelatedJitter(base, mx), nil
	case "exponential":
		return resilient.Exponential(base, mx), nil
	}
	return nil, fmt.Errorf("backoff kind %q: want full-jitter, equal-jitter, decorrelated-jitter or exponential", b.Kind)
}

// Options returns p as resilient's options, and a description of them.
func (p Policy) Options() ([]resilient.Option, string, error) {
	var opts []resilient.Option
	var desc []string
	if p.MaxAttempts != 0 {
		if p.MaxAttempts < 1 {
			return nil, "", errors.New("max_attempts must be at least 1")
		}
		opts = append(opts, resilient.WithMaxAttempts(p.MaxAttempts))
		desc = append(desc, fmt.Sprintf("WithMaxAttempts(%d)", p.MaxAttempts))
	}
	if b := p.Backoff; b != nil {
		bo, err := b.value()
		if err != nil {
			return nil, "", err
		}
		opts = append(opts, resilient.WithBackoff(bo))
		desc = append(desc, fmt.Sprintf("%s(%v, %v)", b.Kind, time.Duration(b.Base), time.Duration(b.Max)))
	}
	// The retry controls: the default (the retry tokens) unless the policy
	// names a kind or a breaker, which joins the chosen kind.
	var controls []resilient.RetryControl
	controlled := false
	if rc := p.RetryControl; rc != nil {
		switch rc.Kind {
		case "tokens":
			controls = append(controls, resilient.RetryTokens{Refill: rc.Refill, CapRatio: rc.CapRatio,
				MinTokens: rc.MinTokens, Window: time.Duration(rc.Window)})
		case "budget":
			controls = append(controls, resilient.RetryBudget{Ratio: rc.Ratio,
				MinPerSecond: rc.MinPerSecond, Window: time.Duration(rc.Window)})
		case "none":
		default:
			return nil, "", fmt.Errorf("retry_control kind %q: want tokens, budget or none", rc.Kind)
		}
		controlled = true
		desc = append(desc, "retry control "+rc.Kind)
	}
	if b := p.Breaker; b != nil {
		if !controlled {
			controls, controlled = append(controls, resilient.RetryTokens{}), true
		}
		controls = append(controls, resilient.CircuitBreaker{FailureRatio: b.FailureRatio, MinRequests: b.MinRequests,
			Window: time.Duration(b.Window), OpenTimeout: time.Duration(b.OpenTimeout), HalfOpenProbes: b.HalfOpenProbes,
			RetriesOnly: b.RetriesOnly})
		desc = append(desc, "breaker")
	}
	if controlled {
		opts = append(opts, resilient.WithRetryControl(controls...))
	}
	if h := p.Hedging; h != nil {
		opts = append(opts, resilient.WithHedging(resilient.HedgingConfig{Delay: time.Duration(h.Delay), Quantile: h.Quantile,
			MaxHedges: h.MaxHedges}))
		desc = append(desc, "hedging")
	}
	if p.AttemptTimeout != 0 {
		opts = append(opts, resilient.WithAttemptTimeout(time.Duration(p.AttemptTimeout)))
		desc = append(desc, "attempt timeout "+time.Duration(p.AttemptTimeout).String())
	}
	if p.RetryAfterMax != 0 {
		opts = append(opts, resilient.WithRetryAfterMax(time.Duration(p.RetryAfterMax)))
		desc = append(desc, "Retry-After max "+time.Duration(p.RetryAfterMax).String())
	}
	if len(desc) == 0 {
		desc = append(desc, "resilient's defaults")
	}
	return opts, strings.Join(desc, ", "), nil
}
