package resilient

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/resilienthttp/resilient/internal/host"

	"github.com/resilienthttp/resilient/internal/wire"
)

// Event streams (text/event-stream), resumed on request: a GET that sends
// a Last-Event-ID header, an empty one on its first connection, says that
// its server honours it. The Transport then reconnects the stream when it
// breaks or ends (a clean EOF), with Last-Event-ID set to the id of the
// last complete event the caller read, after the server's retry: delay.
// A 204 ends the stream. The caller reads whole events only, each at most
// once: an event is handed over once its blank line arrived, a partial
// one is dropped at a cut, and no reconnect is made when an event without
// an id was read after the last id (the server would send it again).
// Reconnects are admitted as resumes are (resume.go). Progress is in
// events (a block with data, which a client dispatches), not bytes: a
// connection that brings only comments, ids or retry: fields made none,
// and its reconnect is a retry. The caller still reads those bytes.

// eventStream reports whether resp, answering req, is an event stream
// the caller asked to resume (a Last-Event-ID header on req).
func eventStream(req *http.Request, resp *http.Response) bool {
	if _, ok := req.Header["Last-Event-Id"]; !ok || resp.StatusCode != http.StatusOK {
		return false
	}
	ct := strings.ToLower(headerValue(resp.Header, "Content-Type"))
	return strings.HasPrefix(ct, "text/event-stream") && (req.Body == nil || req.Body == http.NoBody)
}

// eventBody is the body of a resumable event stream.
//
// Read is the caller's, from one goroutine; Close may come from another:
// mu guards rc's replacement, closed and cancel against it.
type eventBody struct {
	reconnecting
	t   *Transport
	req *http.Request // the caller's: each reconnect is a copy of it
	// buf holds what was read of the event not yet complete; ready the
	// complete events the caller has not read yet.
	buf, ready []byte
	ids        eventIDs
	n          resumeCount
	// cut is the error that broke the stream, reconnected once the
	// caller read the events before it; err the error the stream ended
	// with, returned again.
	cut, err error
}

// eventIDs is what a stream's events said of reconnecting.
type eventIDs struct {
	last string // the id of the last complete event with one
	// unsafe: an event without an id was handed over after the last id
	// (or with none ever): a reconnect would repeat it.
	unsafe bool
	retry  time.Duration // the server's retry: delay
}

// Read reads whole events of the stream, reconnecting it when it ends.
func (s *eventBody) Read(p []byte) (int, error) {
	for {
		if len(s.ready) > 0 {
			n := copy(p, s.ready)
			s.ready = s.ready[n:]
			return n, nil
		}
		switch {
		case s.err != nil:
			return 0, s.err
		case s.cut != nil:
			s.err = s.reconnect(s.cut)
			s.cut = nil
		default:
			s.cut = s.fill()
		}
	}
}

// maxEvent bounds what a stream holds of an event before its end: past
// it, the event is handed over as it comes, and the stream is no longer
// reconnected (its caller read part of an event).
const maxEvent = 1 << 20

// fill reads once from rc and moves the events it completed to ready.
func (s *eventBody) fill() error {
	if cap(s.buf)-len(s.buf) < 4096 {
		s.buf = append(make([]byte, 0, 2*cap(s.buf)+4096), s.buf...)
	}
	n, err := s.rc.Read(s.buf[len(s.buf):cap(s.buf)])
	s.buf = s.buf[:len(s.buf)+n]
	if len(s.buf) > maxEvent {
		s.ids.unsafe = true
		s.ready = append(s.ready[:0], s.buf...)
		s.buf = s.buf[:0]
		return err
	}
	if end, events := s.complete(); end > 0 {
		s.ready = append(s.ready[:0], s.buf[:end]...)
		s.buf = append(s.buf[:0], s.buf[end:]...)
		// Progress is events, not bytes: a stream that sends only
		// comments, ids or retry: fields dispatches nothing, and its
		// reconnects are retries.
		s.n.progressed(int64(events))
	}
	return err
}

// complete returns the length of buf's complete events (up to and with
// the blank line ending the last one), and how many of them had data:
// the events a client dispatches. It notes their ids and retry: fields.
// A \r ending a blank line ends the event, though a \n may follow in
// the next read. That \n is an empty line, which ends no event: it is
// handed over at once, as blank lines between events are. A \r at the
// end of a field's line waits for the next read: it may be \r\n.
func (s *eventBody) complete() (end, events int) {
	start := 0 // where the event being scanned starts
	var id *string
	data := false
	for i := 0; i < len(s.buf); {
		j := bytes.IndexAny(s.buf[i:], "\r\n")
		if j < 0 || j > 0 && s.buf[i+j] == '\r' && i+j+1 == len(s.buf) {
			break // a field's \r at the end waits: it may be \r\n
		}
		line := s.buf[i : i+j]
		next := i + j + 1
		if s.buf[i+j] == '\r' && next < len(s.buf) && s.buf[next] == '\n' {
			next++
		}
		if len(line) == 0 {
			if i > start { // a blank line ends an event
				s.ids.note(id, data)
				if data {
					events++
				}
			}
			end = next // a blank line between events is handed over too
			id, data, start = nil, false, next
		} else {
			id, data = s.ids.field(line, id, data)
		}
		i = next
	}
	return end, events
}

// field notes a line of an event: its id, whether it has data, and the
// stream's retry: delay.
func (ids *eventIDs) field(line []byte, id *string, data bool) (*string, bool) {
	name, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(name) {
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			v := string(value)
			id = &v
		}
	case "data":
		data = true
	case "retry":
		if ms, err := strconv.ParseUint(string(value), 10, 31); err == nil {
			ids.retry = time.Duration(ms) * time.Millisecond
		}
	}
	return id, data
}

// note notes a complete event, with id if it had one, and data if it had
// data.
func (ids *eventIDs) note(id *string, data bool) {
	switch {
	case id != nil:
		ids.last, ids.unsafe = *id, false
	case data:
		ids.unsafe = true
	}
}

// reconnect reconnects the stream after cut, and returns nil once rc
// reads the new connection. Otherwise it returns what the caller gets:
// io.EOF for a stream the server ended (204) or whose end was clean, cut
// as is when the caller gave up or closed the body, else cut wrapped with
// why the stream was not reconnected.
func (s *eventBody) reconnect(cut error) error {
	s.rc.Close()
	s.buf = s.buf[:0] // a partial event is never handed over
	g := host.Applicant{Cfg: &s.t.hc, Ctx: s.req.Context(), Req: s.req}
	var why error
	for why == nil {
		if s.isClosed() || g.Gone() != nil || s.ids.unsafe {
			return cut
		}
		s.n.next()
		if s.n.resumes >= maxResumes {
			why = ErrRetriesExhausted
			break
		}
		var done bool
		if done, why = s.attempt(&g); done {
			return nil
		}
	}
	if cut == io.EOF || why == io.EOF {
		return io.EOF
	}
	return &resumeError{cut: cut, why: why}
}

// attempt sends one reconnect of s, admitted by the gate for g, as a
// resume is (resumeBody.attempt), after the server's retry: delay. done
// says that rc reads the new connection; else why, if not nil, is why no
// reconnect follows (io.EOF: the server ended the stream).
func (s *eventBody) attempt(g *host.Applicant) (done bool, why error) {
	cfg := &s.t.cfg
	now := cfg.nanos()
	h := s.t.hosts.Host(s.req.URL.Host, now)
	var r host.Reservation
	if err := admitResume(&r, cfg, g, h, &s.n, max(s.ids.retry, s.n.delay), now); err != nil {
		return false, err
	}
	s.n.sent()
	resp, err := s.send(g.Ctx)
	took := time.Duration(cfg.nanos() - r.At)
	v := s.check(g, resp, err)
	r.Release(g, healthOf(resp, err, v.d))
	rb := resumeBody{t: s.t, req: s.req, st: &resumeState{n: s.n}}
	rb.event(g, resp, err, v, took, r.Delay)
	if v.d.Action != Success {
		wire.Drop(resp)
		s.n.failed(v.d.Delay)
		return false, v.stop
	}
	if err := s.take(resp.Body); err != nil {
		return false, err
	}
	return true, nil
}

// check judges the answer to a reconnect: Success for an event stream,
// Terminal with io.EOF for a 204, otherwise as a resume's (resumeBody.check).
func (s *eventBody) check(g *host.Applicant, resp *http.Response, err error) verdict {
	if err == nil && g.Gone() == nil {
		switch {
		case resp.StatusCode == http.StatusNoContent:
			return verdict{d: Decision{Action: Terminal}, stop: io.EOF}
		case resp.StatusCode == http.StatusOK && eventStream(s.req, resp):
			return verdict{d: Decision{Action: Success}}
		}
	}
	rb := resumeBody{t: s.t, req: s.req, st: &resumeState{}}
	return rb.check(g, resp, err)
}

// send sends a reconnect of s: the caller's request, with Last-Event-ID
// the last id read. Close ends it.
func (s *eventBody) send(parent context.Context) (*http.Response, error) {
	req := s.req.Clone(parent)
	if s.ids.last != "" {
		req.Header.Set("Last-Event-ID", s.ids.last)
	}
	return s.reconnecting.send(s.t.base, req)
}

// streamable wraps resp's body to reconnect (eventBody) when resp answers
// req, a GET, with an event stream the caller asked to resume (eventStream).
// RoundTrip calls it for a GET answered without a length.
func (t *Transport) streamable(req *http.Request, resp *http.Response) {
	if eventStream(req, resp) {
		resp.Body = &eventBody{reconnecting: reconnecting{rc: resp.Body}, t: t, req: req}
	}
}
