package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// progressEnv forces progress on ("1": also when stderr is not a terminal,
// for tests and for people who tail a log) or off ("0").
const progressEnv = "STRATA_PROGRESS"

// progressEvery spaces the redraws of a progress line (a variable so that
// tests can draw every update).
var progressEvery = progressInterval

// progress shows how far a long command has got, on one line of stderr
// that it rewrites with "\r" and clears at the end: bytes (or items) done,
// events, the rate and, when the total is known, the percentage and the
// time left. It is for a person watching: newProgress returns nil unless
// stderr is a terminal (or STRATA_PROGRESS=1), and every method of a nil
// *progress does nothing, so callers never check. Its methods are safe
// for use by several goroutines.
type progress struct {
	mu     sync.Mutex
	w      io.Writer
	label  string // "replay"
	unit   string // "bytes", or the noun of the items counted ("events")
	total  int64  // 0: unknown
	done   int64
	events int64  // events so far, shown beside bytes when not zero
	note   string // more, e.g. "3/273 sessions"
	start  time.Time
	last   time.Time
	shown  bool
	now    func() time.Time
}

// progressOn reports whether progress goes to w.
func progressOn(w io.Writer) bool {
	switch os.Getenv(progressEnv) {
	case "1":
		return true
	case "0":
		return false
	}
	return isTerminal(w)
}

// newProgress returns a progress line on w for label, counting unit
// ("bytes" or a noun) towards total (0 when unknown), or nil when progress
// is off for w.
func newProgress(w io.Writer, label, unit string, total int64) *progress {
	if !progressOn(w) {
		return nil
	}
	now := time.Now()
	return &progress{w: w, label: label, unit: unit, total: total, start: now, last: now, now: time.Now}
}

// add counts n more units done.
func (p *progress) add(n int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	p.draw()
}

// addEvents counts n more events.
func (p *progress) addEvents(n int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events += n
	p.draw()
}

// set sets the units done and the total (0 keeps the total).
func (p *progress) set(done, total int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = done
	if total > 0 {
		p.total = total
	}
	p.draw()
}

// setNote sets the text shown after the counts.
func (p *progress) setNote(s string) {
	if p != nil {
		p.mu.Lock()
		p.note = s
		p.mu.Unlock()
	}
}

// clear erases the line, so that other output can be written; the next
// update draws it again.
func (p *progress) clear() {
	if p != nil {
		p.mu.Lock()
		p.erase()
		p.mu.Unlock()
	}
}

// above runs fn, which writes other output, with the line erased and not
// redrawn until fn returns.
func (p *progress) above(fn func()) {
	if p == nil {
		fn()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.erase()
	fn()
}

func (p *progress) erase() {
	if p.shown {
		io.WriteString(p.w, "\r\x1b[K")
		p.shown = false
	}
}

// finish erases the line for good.
func (p *progress) finish() {
	if p != nil {
		p.mu.Lock()
		p.erase()
		p.w = io.Discard
		p.mu.Unlock()
	}
}

// reader returns r counting the bytes read from it as done.
func (p *progress) reader(r io.Reader) io.Reader {
	if p == nil {
		return r
	}
	return progressReader{r: r, p: p}
}

// writer returns w counting the bytes written to it as done.
func (p *progress) writer(w io.Writer) io.Writer {
	if p == nil {
		return w
	}
	return progressWriter{w: w, p: p}
}

type progressReader struct {
	r io.Reader
	p *progress
}

func (r progressReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.p.add(int64(n))
	return n, err
}

type progressWriter struct {
	w io.Writer
	p *progress
}

func (w progressWriter) Write(b []byte) (int, error) {
	n, err := w.w.Write(b)
	w.p.add(int64(n))
	return n, err
}

// draw rewrites the line, at most once per progressEvery. p.mu is held.
func (p *progress) draw() {
	now := p.now()
	if now.Sub(p.last) < progressEvery {
		return
	}
	p.last = now
	io.WriteString(p.w, "\r"+p.line(now)+"\x1b[K")
	p.shown = true
}

// line renders the state: "replay: 12.0 MiB of 40.0 MiB (30%), 1,234
// events, 4.0 MiB/s, ETA 7s".
func (p *progress) line(now time.Time) string {
	amount := func(n int64) string {
		if p.unit == "bytes" {
			return humanBytes(n)
		}
		return groupDigits(n)
	}
	var b strings.Builder
	b.WriteString(p.label + ": " + amount(p.done))
	if p.total > 0 {
		b.WriteString(" of " + amount(p.total))
	}
	if p.unit != "bytes" {
		b.WriteString(" " + p.unit)
	}
	if p.total > 0 {
		fmt.Fprintf(&b, " (%d%%)", min(100, p.done*100/p.total))
	}
	if p.events > 0 {
		b.WriteString(", " + groupDigits(p.events) + " events")
	}
	if p.note != "" {
		b.WriteString(", " + p.note)
	}
	secs := now.Sub(p.start).Seconds()
	if secs > 0 && p.done > 0 {
		rate := float64(p.done) / secs
		if p.unit == "bytes" {
			b.WriteString(", " + humanBytes(int64(rate)) + "/s")
		} else {
			b.WriteString(", " + groupDigits(int64(rate)) + " " + p.unit + "/s")
		}
		if p.total > p.done {
			left := time.Duration(float64(p.total-p.done) / rate * float64(time.Second))
			b.WriteString(", ETA " + left.Round(time.Second).String())
		}
	}
	return b.String()
}

// humanBytes renders n bytes as "512 B", "3.4 KiB", "12.0 MiB".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// groupDigits renders n as "12,345".
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

// inputSize returns the bytes of the named files that are regular files
// ("-": stdin, when it is one), or 0 when any size is unknown.
func inputSize(files []string, stdin io.Reader) int64 {
	var total int64
	for _, name := range files {
		var fi os.FileInfo
		var err error
		if name == "-" {
			f, ok := stdin.(*os.File)
			if !ok {
				return 0
			}
			fi, err = f.Stat()
		} else {
			fi, err = os.Stat(name)
		}
		if err != nil || !fi.Mode().IsRegular() {
			return 0
		}
		total += fi.Size()
	}
	return total
}
