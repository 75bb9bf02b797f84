package idempotency

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// decodeJSON parses body as one JSON value, numbers kept as json.Number.
func decodeJSON(body []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

// canonicalJSON appends the canonical form of v (a value decoded with UseNumber)
// to dst: object keys sorted by their UTF-8 bytes, no insignificant white space,
// strings escaped minimally, numbers normalised so that 1, 1.0, 10e-1 and 1e0
// are one number (see canonicalNumber).
func canonicalJSON(dst []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, v)
	case json.Number:
		return append(dst, canonicalNumber(string(v))...)
	case string:
		return appendString(dst, v)
	case []any:
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = canonicalJSON(dst, e)
		}
		return append(dst, ']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = canonicalJSON(dst, v[k])
		}
		return append(dst, '}')
	}
	// Unreachable for decoded JSON; keep the hash total anyway.
	return append(dst, fmt.Sprintf("%q", fmt.Sprint(v))...)
}

// canonicalNumber normalises a JSON number literal to [-]D[eN]: D the
// significant digits without leading or trailing zeros, N the decimal exponent
// (omitted when 0). Zero, negative or not, is "0". The exponent is computed
// with math/big, so exponents beyond int64 normalise exactly too.
func canonicalNumber(lit string) string {
	s := lit
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, expStr, hasExp := strings.Cut(strings.ToLower(s), "e")
	exp := new(big.Int)
	if hasExp {
		if _, ok := exp.SetString(expStr, 10); !ok {
			return lit
		}
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return "0"
	}
	trimmed := strings.TrimRight(digits, "0")
	exp.Add(exp, big.NewInt(int64(len(digits)-len(trimmed)-len(frac))))
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	b.WriteString(trimmed)
	if exp.Sign() != 0 {
		b.WriteByte('e')
		b.WriteString(exp.String())
	}
	return b.String()
}

// appendString appends s as a JSON string, escaping only what JSON requires
// ('"', '\\' and control characters); invalid UTF-8 becomes U+FFFD.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, "\ufffd"...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
