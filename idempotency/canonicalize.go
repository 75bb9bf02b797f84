package idempotency

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is the deepest nesting accepted, as encoding/json accepts it.
const maxDepth = 10000

var errNotJSON = errors.New("not one JSON value")

// canonicalizer writes the canonical JSON of one document in a single
// pass over it, without decoding it into values: the output of
// canonicalJSON(decodeJSON(body)), byte for byte, and an error where
// decodeJSON fails (FuzzCanonical checks both). Its scratch space is
// reused through canonPool, so a fingerprint allocates nothing.
type canonicalizer struct {
	in    []byte
	pos   int
	depth int
	keys  []byte   // the decoded keys of the objects being written
	mems  []member // the members of the objects being written
	tmp   []byte   // where an object's members are reordered
	moved int      // bytes reordered so far: bounded (see order)
	slow  bool     // the bound was hit
}

// member is one member of an object: its decoded key in keys, and its
// canonical text ("key":value) in the output.
type member struct {
	k0, k1 int
	v0, v1 int
}

var canonPool = sync.Pool{New: func() any { return new(canonicalizer) }}

// appendCanonical appends the canonical JSON of body to dst: object
// members sorted by their keys' UTF-8 bytes (of repeated keys the last
// kept), no insignificant white space, strings escaped minimally with
// invalid UTF-8 and lone surrogates as U+FFFD, numbers normalised (see
// canonicalNumber). It returns an error, and dst as it was, if body is
// not exactly one JSON value.
func appendCanonical(dst, body []byte) ([]byte, error) {
	c := canonPool.Get().(*canonicalizer)
	out, err := c.canonical(dst, body)
	canonPool.Put(c)
	return out, err
}

// canonical is appendCanonical with c's scratch space.
func (c *canonicalizer) canonical(dst, body []byte) ([]byte, error) {
	c.in, c.pos, c.depth, c.moved, c.slow = body, 0, 0, 0, false
	n := len(dst)
	out, ok := c.value(dst)
	if ok {
		c.space()
		ok = c.pos == len(c.in)
	}
	slow := c.slow
	c.in, c.keys, c.mems, c.tmp = nil, c.keys[:0], c.mems[:0], c.tmp[:0]
	if slow {
		// Unsorted objects nested deep: moving each one's members again
		// at every level would be quadratic; decoding is linear.
		v, err := decodeJSON(body)
		if err != nil {
			return dst[:n], err
		}
		return canonicalJSON(dst[:n], v), nil
	}
	if !ok {
		return dst[:n], errNotJSON
	}
	return out, nil
}

// maxMoved bounds the bytes order moves for a document of n bytes.
func maxMoved(n int) int { return 4*n + 64<<10 }

func (c *canonicalizer) space() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// lit consumes word (true, false, null) and appends it.
func (c *canonicalizer) lit(dst []byte, word string) ([]byte, bool) {
	if len(c.in)-c.pos < len(word) || string(c.in[c.pos:c.pos+len(word)]) != word {
		return dst, false
	}
	c.pos += len(word)
	return append(dst, word...), true
}

func (c *canonicalizer) value(dst []byte) ([]byte, bool) {
	c.space()
	if c.pos == len(c.in) {
		return dst, false
	}
	switch b := c.in[c.pos]; {
	case b == '{':
		return c.object(dst)
	case b == '[':
		return c.array(dst)
	case b == '"':
		return c.str(dst)
	case b == 't':
		return c.lit(dst, "true")
	case b == 'f':
		return c.lit(dst, "false")
	case b == 'n':
		return c.lit(dst, "null")
	case b == '-' || b >= '0' && b <= '9':
		return c.number(dst)
	}
	return dst, false
}

func (c *canonicalizer) array(dst []byte) ([]byte, bool) {
	if c.depth++; c.depth > maxDepth {
		return dst, false
	}
	c.pos++ // '['
	dst = append(dst, '[')
	c.space()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		c.depth--
		return append(dst, ']'), true
	}
	for {
		var ok bool
		if dst, ok = c.value(dst); !ok {
			return dst, false
		}
		c.space()
		if c.pos == len(c.in) {
			return dst, false
		}
		switch c.in[c.pos] {
		case ',':
			c.pos++
			dst = append(dst, ',')
		case ']':
			c.pos++
			c.depth--
			return append(dst, ']'), true
		default:
			return dst, false
		}
	}
}

func (c *canonicalizer) object(dst []byte) ([]byte, bool) {
	if c.depth++; c.depth > maxDepth {
		return dst, false
	}
	c.pos++ // '{'
	start := len(dst)
	dst = append(dst, '{')
	base, keyBase := len(c.mems), len(c.keys)
	c.space()
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
		c.depth--
		return append(dst, '}'), true
	}
	for {
		c.space()
		if c.pos == len(c.in) || c.in[c.pos] != '"' {
			return dst, false
		}
		m := member{k0: len(c.keys), v0: len(dst)}
		var ok bool
		if c.keys, ok = c.decode(c.keys); !ok {
			return dst, false
		}
		m.k1 = len(c.keys)
		dst = append(appendEscaped(dst, c.keys[m.k0:m.k1]), ':')
		c.space()
		if c.pos == len(c.in) || c.in[c.pos] != ':' {
			return dst, false
		}
		c.pos++
		if dst, ok = c.value(dst); !ok {
			return dst, false
		}
		m.v1 = len(dst)
		c.mems = append(c.mems, m)
		c.space()
		if c.pos == len(c.in) {
			return dst, false
		}
		if c.in[c.pos] == '}' {
			c.pos++
			break
		}
		if c.in[c.pos] != ',' {
			return dst, false
		}
		c.pos++
		dst = append(dst, ',')
	}
	dst = c.order(dst, start, c.mems[base:])
	c.mems, c.keys = c.mems[:base], c.keys[:keyBase]
	c.depth--
	return append(dst, '}'), !c.slow
}

// order rewrites the members mems, written after dst[start] ('{') in the
// order read and separated by commas, sorted by key, the last of repeated
// keys kept.
func (c *canonicalizer) order(dst []byte, start int, mems []member) []byte {
	sorted := true
	for i := 1; i < len(mems); i++ {
		if c.cmp(mems[i-1], mems[i]) >= 0 {
			sorted = false
			break
		}
	}
	if sorted {
		return dst
	}
	if c.moved += len(dst) - start; c.moved > maxMoved(len(c.in)) {
		c.slow = true
		return dst
	}
	slices.SortStableFunc(mems, c.cmp)
	c.tmp = append(c.tmp[:0], dst[start+1:]...)
	dst = dst[:start+1]
	off := start + 1
	first := true
	for i, m := range mems {
		if i+1 < len(mems) && c.cmp(m, mems[i+1]) == 0 {
			continue // a later member has the key: it wins
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, c.tmp[m.v0-off:m.v1-off]...)
	}
	return dst
}

func (c *canonicalizer) cmp(a, b member) int {
	return bytes.Compare(c.keys[a.k0:a.k1], c.keys[b.k0:b.k1])
}

// appendEscaped appends the decoded string s (valid UTF-8) as
// appendString does: quoted, '"', '\\' and control characters escaped.
func appendEscaped(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, b := range s {
		switch {
		case b == '"' || b == '\\':
			dst = append(dst, '\\', b)
		case b < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
		default:
			dst = append(dst, b)
		}
	}
	return append(dst, '"')
}

// str consumes a string and appends it escaped minimally.
func (c *canonicalizer) str(dst []byte) ([]byte, bool) {
	k := len(c.keys)
	var ok bool
	if c.keys, ok = c.decode(c.keys); !ok {
		return dst, false
	}
	dst = appendEscaped(dst, c.keys[k:])
	c.keys = c.keys[:k]
	return dst, true
}

// decode consumes a string and appends its decoded bytes, as
// encoding/json decodes it: escapes resolved, a valid surrogate pair
// joined, a lone surrogate and invalid UTF-8 as U+FFFD.
func (c *canonicalizer) decode(dst []byte) ([]byte, bool) {
	in := c.in
	i := c.pos + 1 // after '"'
	for i < len(in) {
		b := in[i]
		switch {
		case b == '"':
			c.pos = i + 1
			return dst, true
		case b < 0x20:
			return dst, false
		case b == '\\':
			if i+1 == len(in) {
				return dst, false
			}
			var ok bool
			if dst, i, ok = escape(dst, in, i); !ok {
				return dst, false
			}
		case b < utf8.RuneSelf:
			dst = append(dst, b)
			i++
		default:
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, in[i:i+size]...)
			}
			i += size
		}
	}
	return dst, false
}

// escape appends the escape at in[i] ('\\') decoded and returns the index
// after it.
func escape(dst, in []byte, i int) ([]byte, int, bool) {
	switch e := in[i+1]; e {
	case '"', '\\', '/':
		return append(dst, e), i + 2, true
	case 'b':
		return append(dst, '\b'), i + 2, true
	case 'f':
		return append(dst, '\f'), i + 2, true
	case 'n':
		return append(dst, '\n'), i + 2, true
	case 'r':
		return append(dst, '\r'), i + 2, true
	case 't':
		return append(dst, '\t'), i + 2, true
	case 'u':
		r := hex4(in, i)
		if r < 0 {
			return dst, i, false
		}
		i += 6
		if utf16.IsSurrogate(r) {
			if r2 := hex4(in, i); r2 >= 0 {
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					return utf8.AppendRune(dst, d), i + 6, true
				}
			}
			r = utf8.RuneError
		}
		return utf8.AppendRune(dst, r), i, true
	}
	return dst, i, false
}

// hex4 reads \uXXXX at in[i:], or returns -1.
func hex4(in []byte, i int) rune {
	if len(in)-i < 6 || in[i] != '\\' || in[i+1] != 'u' {
		return -1
	}
	var r rune
	for _, b := range in[i+2 : i+6] {
		switch {
		case b >= '0' && b <= '9':
			b -= '0'
		case b >= 'a' && b <= 'f':
			b -= 'a' - 10
		case b >= 'A' && b <= 'F':
			b -= 'A' - 10
		default:
			return -1
		}
		r = r*16 + rune(b)
	}
	return r
}

// number consumes a number and appends its canonical form.
func (c *canonicalizer) number(dst []byte) ([]byte, bool) {
	in, i := c.in, c.pos
	neg := in[i] == '-'
	if neg {
		i++
	}
	digits := func() int {
		j := i
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		return i - j
	}
	i0 := i
	if n := digits(); n == 0 || n > 1 && in[i0] == '0' {
		return dst, false
	}
	intPart := in[i0:i]
	var frac []byte
	if i < len(in) && in[i] == '.' {
		i++
		f0 := i
		if digits() == 0 {
			return dst, false
		}
		frac = in[f0:i]
	}
	var exp []byte
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		e0 := i
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if digits() == 0 {
			return dst, false
		}
		exp = in[e0:i]
	}
	lit := in[c.pos:i]
	c.pos = i
	return appendNumber(dst, lit, neg, intPart, frac, exp), true
}

// appendNumber appends canonicalNumber(lit) for the parts of a valid
// literal, without allocating unless its exponent exceeds 17 digits.
func appendNumber(dst, lit []byte, neg bool, intPart, frac, exp []byte) []byte {
	e, ok := smallExp(exp)
	if !ok {
		return append(dst, canonicalNumber(string(lit))...)
	}
	// The significant digits: intPart then frac, leading zeros dropped.
	at := func(k int) byte {
		if k < len(intPart) {
			return intPart[k]
		}
		return frac[k-len(intPart)]
	}
	n := len(intPart) + len(frac)
	lo := 0
	for lo < n && at(lo) == '0' {
		lo++
	}
	if lo == n {
		return append(dst, '0')
	}
	hi := n
	for at(hi-1) == '0' {
		hi--
	}
	e += int64(n-hi) - int64(len(frac))
	if neg {
		dst = append(dst, '-')
	}
	for k := lo; k < hi; k++ {
		dst = append(dst, at(k))
	}
	if e != 0 {
		dst = strconv.AppendInt(append(dst, 'e'), e, 10)
	}
	return dst
}

// smallExp parses an exponent ([+-]digits, or none) of at most 17
// significant digits.
func smallExp(exp []byte) (int64, bool) {
	if len(exp) == 0 {
		return 0, true
	}
	neg := exp[0] == '-'
	if exp[0] == '-' || exp[0] == '+' {
		exp = exp[1:]
	}
	for len(exp) > 1 && exp[0] == '0' {
		exp = exp[1:]
	}
	if len(exp) > 17 {
		return 0, false
	}
	var e int64
	for _, b := range exp {
		e = e*10 + int64(b-'0')
	}
	if neg {
		e = -e
	}
	return e, true
}
