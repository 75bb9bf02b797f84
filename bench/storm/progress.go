package storm

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// progress draws a progress bar of finished operations on a writer (a
// terminal: redrawn in place every 200 ms; anything else: one line per 10 %).
// A nil *progress counts nothing and draws nothing. It runs on real time, so
// it also moves during virtual runs.
type progress struct {
	w       io.Writer
	total   int64
	done    atomic.Int64
	label   atomic.Pointer[string]
	started time.Time
	tty     bool
	quit    chan struct{}
	wg      sync.WaitGroup
}

// startProgress starts drawing on w, or returns nil if w is nil.
func startProgress(w io.Writer, total int) *progress {
	if w == nil {
		return nil
	}
	p := &progress{w: w, total: max(int64(total), 1), started: time.Now(), quit: make(chan struct{})}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	p.wg.Go(p.loop)
	return p
}

// add counts n finished operations.
func (p *progress) add(n int) {
	if p != nil {
		p.done.Add(int64(n))
	}
}

// setLabel sets the text shown after the bar.
func (p *progress) setLabel(s string) {
	if p != nil {
		p.label.Store(&s)
	}
}

// stop draws the final state and stops.
func (p *progress) stop() {
	if p == nil {
		return
	}
	close(p.quit)
	p.wg.Wait()
}

func (p *progress) loop() {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	lastTenth := int64(-1)
	for {
		select {
		case <-p.quit:
			p.draw(true)
			return
		case <-t.C:
			if p.tty {
				p.draw(false)
			} else if tenth := p.done.Load() * 10 / p.total; tenth != lastTenth {
				lastTenth = tenth
				p.draw(false)
			}
		}
	}
}

func (p *progress) draw(final bool) {
	const width = 30
	done := min(p.done.Load(), p.total)
	filled := int(done * width / p.total)
	label := ""
	if l := p.label.Load(); l != nil {
		label = " " + *l
	}
	line := fmt.Sprintf("storm [%s%s] %3d%% %d/%d ops %s%s",
		strings.Repeat("=", filled), strings.Repeat(" ", width-filled),
		done*100/p.total, done, p.total, time.Since(p.started).Round(time.Second), label)
	switch {
	case p.tty && final:
		fmt.Fprintf(p.w, "\r\033[K%s\n", line)
	case p.tty:
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	default:
		fmt.Fprintln(p.w, line)
	}
}
