package e2e

// Paired compatibility tests over a raw HTTP/2 server (issue 23, #23.3):
// a stream the server refuses (RST_STREAM REFUSED_STREAM) or leaves above
// a GOAWAY's last stream id was not processed, and net/http re-sends it by
// itself. Bare and wrapped, the keyed POST must succeed with one effect.

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Refusal is how the raw server turns away the first request it gets.
type h2Refusal int

const (
	refuseStream     h2Refusal = iota // RST_STREAM REFUSED_STREAM
	goAwayBelow                       // GOAWAY whose last stream id is below the request's
	appliedThenReset                  // applied, then RST_STREAM INTERNAL_ERROR: maybe processed
)

// rawH2 is an HTTP/2 server written with the http2 Framer: it turns away
// the first complete request it reads (not processed: no effect) and
// answers every later one with 200 "ok", counting it as an effect; or, with
// appliedThenReset, applies every request and resets its stream.
type rawH2 struct {
	how     h2Refusal
	turned  atomic.Int32 // requests turned away
	effects atomic.Int32 // requests applied
	mu      sync.Mutex
	conns   []net.Conn
}

// start serves h2 over TLS (ALPN "h2") on a loopback httptest server.
func (s *rawH2) start(t *testing.T) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.EnableHTTP2 = true
	srv.Config.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){
		"h2": func(_ *http.Server, c *tls.Conn, _ http.Handler) { s.serve(c) },
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	t.Cleanup(s.closeAll) // before srv.Close, which waits for serve to return
	return srv
}

func (s *rawH2) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
}

func (s *rawH2) serve(c net.Conn) {
	s.mu.Lock()
	s.conns = append(s.conns, c)
	s.mu.Unlock()
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if fr.WriteSettings() != nil {
		return
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		end := false
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() && fr.WriteSettingsAck() != nil {
				return
			}
		case *http2.PingFrame:
			if !f.IsAck() && fr.WritePing(true, f.Data) != nil {
				return
			}
		case *http2.MetaHeadersFrame:
			end = f.StreamEnded()
		case *http2.DataFrame:
			end = f.StreamEnded()
		case *http2.GoAwayFrame:
			return
		}
		if end && s.complete(fr, f.Header().StreamID) != nil {
			return
		}
	}
}

// complete turns away or answers the request on stream id, read whole.
func (s *rawH2) complete(fr *http2.Framer, id uint32) error {
	if s.how == appliedThenReset {
		s.effects.Add(1)
		return fr.WriteRSTStream(id, http2.ErrCodeInternal)
	}
	if s.turned.Load() == 0 {
		s.turned.Add(1)
		if s.how == refuseStream {
			return fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
		}
		var last uint32 // the stream before id (client streams are odd), or none
		if id > 2 {
			last = id - 2
		}
		return fr.WriteGoAway(last, http2.ErrCodeNo, nil)
	}
	s.effects.Add(1)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	enc.WriteField(hpack.HeaderField{Name: "content-length", Value: "2"})
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		return err
	}
	return fr.WriteData(id, true, []byte("ok"))
}

// h2Client returns srv's client, wrapped or not.
func h2Client(srv *httptest.Server, wrap bool) *http.Client {
	c := srv.Client()
	if wrap {
		c = resilient.Wrap(c, resilient.WithBackoff(resilient.Exponential(time.Millisecond, time.Millisecond)))
	}
	return c
}

// h2Post sends a keyed POST (keyed when wrapped) to srv.
func h2Post(t *testing.T, c *http.Client, srv *httptest.Server) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/charges", strings.NewReader(`{"amount":1}`))
	require.NoError(t, err)
	return c.Do(req)
}

// sidesH2 runs f as a "bare" and a "wrapped" subtest.
func sidesH2(t *testing.T, f func(t *testing.T, wrap bool)) {
	for _, wrap := range []bool{false, true} {
		name := "bare"
		if wrap {
			name = "wrapped"
		}
		t.Run(name, func(t *testing.T) { f(t, wrap) })
	}
}

// (#23.3) A keyed POST whose stream was refused, or left above a GOAWAY's
// last stream id, is re-sent by net/http and succeeds with one effect,
// wrapped as bare.
func TestCompatHTTP2NotProcessedIsResent(t *testing.T) {
	for _, tc := range []struct {
		name string
		how  h2Refusal
	}{
		{"REFUSED_STREAM", refuseStream},
		{"GOAWAY below the stream", goAwayBelow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sidesH2(t, func(t *testing.T, wrap bool) {
				s := &rawH2{how: tc.how}
				srv := s.start(t)
				resp, err := h2Post(t, h2Client(srv, wrap), srv)
				require.NoError(t, err, "the stream was not processed: net/http re-sends it")
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Equal(t, 2, resp.ProtoMajor)
				assert.Equal(t, "ok", string(b))
				assert.EqualValues(t, 1, s.turned.Load(), "the server turned the first request away")
				assert.EqualValues(t, 1, s.effects.Load(), "one effect")
			})
		})
	}
}

// (#23.3, the other side) A stream the server may have processed (applied,
// then reset with INTERNAL_ERROR) is not re-sent: bare and wrapped make one
// effect and return an error.
func TestCompatHTTP2MaybeProcessedIsNotResent(t *testing.T) {
	sidesH2(t, func(t *testing.T, wrap bool) {
		s := &rawH2{how: appliedThenReset}
		srv := s.start(t)
		resp, err := h2Post(t, h2Client(srv, wrap), srv)
		if resp != nil {
			resp.Body.Close()
		}
		require.Error(t, err)
		assert.EqualValues(t, 1, s.effects.Load(), "one effect")
	})
}
