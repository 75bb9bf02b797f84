package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzCanonicalReplay drives the fake server's request fingerprint through
// its HTTP API (in-process, Server.Transport): a JSON object is posted under
// a new key, then the same object written differently — members in another
// order, numbers rewritten (1.5 as 15e-1, 150E-2, 0.15e+1), strings
// re-escaped, other white space — under the same key, which must replay the
// first answer byte for byte; then the object with one member more, which
// must be refused as a payload mismatch (422).
func FuzzCanonicalReplay(f *testing.F) {
	for _, s := range []string{
		`{"amount":100,"currency":"usd"}`,
		`{}`,
		`{"a":1.0,"b":[1,2,{"c":-0.0}],"d":"\u00e9\ud83d\ude00"}`,
		`{"x":null,"y":true,"z":false,"w":[]}`,
		`{"s":"a\"b\\c\/\u2028\n\t"}`,
		`{"big":123456789012345678901234567890,"tiny":1e-400,"huge":1E400}`,
		`{"neg":-12.500e-3,"z":0e10,"y":-0}`,
		`{"a":{"b":{"c":[[],{},[{"d":0.000001}]]}}}`,
		`{"dup":1,"dup":2}`,
		"{\"bad\":\"\xff\xfe\"}",
	} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(0xa5))
	}
	srv := fakeserver.NewUnstarted()
	f.Cleanup(srv.Close)
	client := &http.Client{Transport: srv.Transport()}
	var keys atomic.Int64
	f.Fuzz(func(t *testing.T, body string, mode uint8) {
		obj, ok := decodeJSONObject(body)
		if !ok || len(body) > 64<<10 {
			t.Skip("not one JSON object of a sane size")
		}
		w := &rewriter{mode: mode}
		alt := w.value(nil, obj)
		if w.exotic {
			// The int64 edge is TestCanonicalReplayExtremeExponents's.
			t.Skip("an exponent beyond ±2^40")
		}
		key := fmt.Sprintf("fuzz-%d", keys.Add(1))

		status, _, first := postRaw(t, client, key, body)
		if status != http.StatusCreated {
			t.Fatalf("POST %q: status %d, want 201: %s", body, status, first)
		}
		status, idem, again := postRaw(t, client, key, string(alt))
		if status != http.StatusCreated || idem != "replayed" || !bytes.Equal(first, again) {
			t.Fatalf("the same object, rewritten, under the same key: status %d, Idempotency-Status %q, want a replay of 201\nfirst:     %s\nrewritten: %s\nanswer:    %s",
				status, idem, body, alt, again)
		}
		other := make(map[string]any, len(obj)+1)
		for k, v := range obj {
			other[k] = v
		}
		extra := "e2e_extra"
		for other[extra] != nil {
			extra += "_"
		}
		other[extra] = json.Number("1")
		more := w.value(nil, other)
		status, _, answer := postRaw(t, client, key, string(more))
		if status != http.StatusUnprocessableEntity {
			t.Fatalf("another object under the same key: status %d, want 422\nfirst: %s\nother: %s\nanswer: %s", status, body, more, answer)
		}
	})
}

// postRaw posts body under key to /v1/charges and returns the status, the
// Idempotency-Status header and the body of the answer.
func postRaw(t *testing.T, client *http.Client, key, body string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://fake.test/v1/charges", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Idempotency-Status"), b
}

// decodeJSONObject decodes body as one JSON object, numbers as json.Number.
func decodeJSONObject(body string) (map[string]any, bool) {
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, false
	}
	obj, ok := v.(map[string]any)
	return obj, ok
}

// rewriter writes a decoded JSON value as other, equivalent JSON text; the
// bits of mode choose the variations.
type rewriter struct {
	mode   uint8
	n      int  // values written, to vary choices along the text
	exotic bool // a number's exponent was too large to rewrite sensibly
}

func (w *rewriter) bit(i int) bool { return w.mode&(1<<((i+w.n)%8)) != 0 }

func (w *rewriter) space(dst []byte) []byte {
	if w.bit(0) {
		return append(dst, " \n\t\r"[w.n%4])
	}
	return dst
}

func (w *rewriter) value(dst []byte, v any) []byte {
	w.n++
	dst = w.space(dst)
	switch v := v.(type) {
	case nil:
		dst = append(dst, "null"...)
	case bool:
		dst = strconv.AppendBool(dst, v)
	case json.Number:
		dst = append(dst, w.number(string(v))...)
	case string:
		dst = w.string(dst, v)
	case []any:
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = w.value(dst, e)
		}
		dst = append(w.space(dst), ']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if w.bit(1) {
			slices.Reverse(keys)
		} else if len(keys) > 1 {
			r := w.n % len(keys)
			keys = append(keys[r:], keys[:r]...)
		}
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = w.string(w.space(dst), k)
			dst = append(w.space(dst), ':')
			dst = w.value(dst, v[k])
		}
		dst = append(w.space(dst), '}')
	default:
		panic(fmt.Sprintf("unexpected %T", v))
	}
	return w.space(dst)
}

// number rewrites a JSON number literal as another literal of the same
// value: the significant digits times a power of ten, shifted by zero to
// three places, with e or E and an optional +.
func (w *rewriter) number(lit string) string {
	s := lit
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, expStr, _ := strings.Cut(strings.ToLower(s), "e")
	exp := new(big.Int)
	if expStr != "" {
		if _, ok := exp.SetString(strings.TrimPrefix(expStr, "+"), 10); !ok {
			panic("bad exponent in " + lit)
		}
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	sign := ""
	if neg && w.bit(2) {
		sign = "-" // -0 is 0 too
	}
	if digits == "" {
		return sign + [...]string{"0", "0.0", "0e5", "0.000E-3"}[w.n%4]
	}
	if neg {
		sign = "-"
	}
	exp.Sub(exp, big.NewInt(int64(len(frac))))
	if exp.CmpAbs(big.NewInt(1<<40)) > 0 {
		w.exotic = true
		return lit
	}
	shift := w.n % 4
	e := exp.Int64() - int64(shift)
	digits += strings.Repeat("0", shift)
	if w.bit(3) && len(digits) > 1 {
		// d.ddd form: move the point left.
		e += int64(len(digits) - 1)
		digits = digits[:1] + "." + digits[1:]
	}
	mark := "e"
	if w.bit(4) {
		mark = "E"
	}
	plus := ""
	if e >= 0 && w.bit(5) {
		plus = "+"
	}
	return sign + digits + mark + plus + strconv.FormatInt(e, 10)
}

// string writes s as a JSON string, escaping some characters that need no
// escape (\u00XX, \/, surrogate pairs).
func (w *rewriter) string(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i, r := range s {
		esc := w.bit(6) && (i+w.n)%3 == 0
		switch {
		case r == '"' || r == '\\':
			dst = append(dst, '\\', byte(r))
		case r == '/' && esc:
			dst = append(dst, '\\', '/')
		case r < 0x20 || esc:
			if r >= 0x10000 {
				r1, r2 := utf16.EncodeRune(r)
				dst = fmt.Appendf(dst, `\u%04x\u%04X`, r1, r2)
			} else {
				dst = append(dst, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
			}
		default:
			dst = utf8.AppendRune(dst, r)
		}
	}
	return append(dst, '"')
}

// TestCanonicalReplayExtremeExponents: numbers whose exponents sit at the
// edge of an int64. The same number written two ways must replay; two
// different numbers must not share a fingerprint (422, not a replay).
func TestCanonicalReplayExtremeExponents(t *testing.T) {
	cases := []struct {
		name, first, second string
		replay              bool
	}{
		{"same number, exponent past int64", `{"n":1e9223372036854775808}`, `{"n":10e9223372036854775807}`, true},
		{"same number, exponent at int64 max", `{"n":1e9223372036854775807}`, `{"n":10e9223372036854775806}`, true},
		{"different numbers, exponent wraps around", `{"n":0.1e-9223372036854775808}`, `{"n":1e9223372036854775807}`, false},
	}
	srv := fakeserver.NewUnstarted()
	defer srv.Close()
	client := &http.Client{Transport: srv.Transport()}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := fmt.Sprintf("extreme-%d", i)
			status, _, _ := postRaw(t, client, key, c.first)
			require.Equal(t, http.StatusCreated, status)
			status, idem, _ := postRaw(t, client, key, c.second)
			if c.replay {
				assert.Equal(t, "replayed", idem, "%s then %s: the same number, status %d", c.first, c.second, status)
			} else {
				assert.Equal(t, http.StatusUnprocessableEntity, status, "%s then %s: different numbers, but the second was %s", c.first, c.second, idem)
			}
		})
	}
}
