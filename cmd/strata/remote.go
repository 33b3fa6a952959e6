package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/debughttp"
	"github.com/strata-go/strata/store"
)

// envToken names the environment variable whose value, when set, is sent
// as the bearer token to a debughttp handler (debughttp.Options.Token). It
// is never a flag: a flag shows in the process list.
const envToken = "STRATA_DEBUG_TOKEN"

// isURL reports whether a database argument is the URL of a running
// agent's debughttp handler rather than a file.
func isURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// remote reads a database through a running agent's debughttp handler.
type remote struct {
	ctx     context.Context // ends every request; nil: never
	base    string          // the handler's URL, without a trailing slash
	timeout time.Duration   // for connecting, and for any silence of the server
	token   string
	client  *http.Client
	prog    *progress // backup: counts towards the announced length (nil: none)
}

// newRemote returns a client of the handler at base.
func newRemote(base string, timeout time.Duration) *remote {
	return &remote{base: strings.TrimRight(base, "/"), timeout: timeout, token: os.Getenv(envToken),
		client: &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, TLSHandshakeTimeout: timeout}}}
}

// HTTPError is an error answer of a strata handler: its status and its
// message.
type HTTPError struct {
	URL     string
	Status  string // "404 Not Found"
	Message string // the server's {"error": ...}
	Damaged bool   // the server's "damaged": the error is damage in the database
}

// Error implements error.
func (e *HTTPError) Error() string { return fmt.Sprintf("%s: %s: %s", e.URL, e.Status, e.Message) }

// body is a response body whose reads time out after a silence of the
// server longer than the timeout, and which knows the length announced.
// Only the time spent waiting for the server counts: the timer runs while
// a Read waits, not while the caller writes what it read (to a pipe into a
// pager, a slow disk).
type body struct {
	resp    *http.Response
	timer   *time.Timer
	timeout time.Duration
	stalled *atomic.Bool
	parent  context.Context // the caller's: when it ends, that is why a read failed
	cancel  context.CancelFunc
	n       int64
}

// Read implements io.Reader.
func (b *body) Read(p []byte) (int, error) {
	b.timer.Reset(b.timeout)
	n, err := b.resp.Body.Read(p)
	b.timer.Stop()
	b.n += int64(n)
	switch {
	case err == nil || err == io.EOF:
	case b.parent != nil && b.parent.Err() != nil:
		err = errors.Wrapf(b.parent.Err(), "%s: after %d bytes", b.resp.Request.URL.Redacted(), b.n)
	case b.stalled.Load():
		err = errors.WithHint(errors.Newf("%s: the server sent nothing for %s", b.resp.Request.URL.Redacted(), b.timeout),
			"raise --timeout for a large or busy database")
	case b.resp.ContentLength >= 0:
		err = errors.WithHint(errors.Wrapf(err, "%s: transfer cut after %d of %d bytes", b.resp.Request.URL.Redacted(), b.n, b.resp.ContentLength), hintCut)
	default:
		err = errors.WithHint(errors.Wrapf(err, "%s: transfer cut after %d bytes", b.resp.Request.URL.Redacted(), b.n), hintCut)
	}
	return n, err
}

// hintCut says why a handler cuts an answer it has begun: a read that met
// damage (the status line is gone, so it cannot say so), or an agent that
// stopped.
const hintCut = "the handler stopped mid-answer: the agent stopped, or its read met damage; 'strata verify' on the same URL checks the database"

// Close releases the response.
func (b *body) Close() error {
	b.timer.Stop()
	err := b.resp.Body.Close()
	b.cancel()
	return err
}

// complete returns an error unless the whole announced body was read.
func (b *body) complete() error {
	if cl := b.resp.ContentLength; cl >= 0 && b.n != cl {
		return errors.Newf("%s: transfer cut: %d of %d bytes", b.resp.Request.URL.Redacted(), b.n, cl)
	}
	return nil
}

// get asks endpoint with q and returns the body of a 200 answer from a
// strata handler; any other answer is an error saying what the server said.
func (c *remote) get(endpoint string, q url.Values) (*body, error) {
	u := c.base + "/" + endpoint
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	parent := c.ctx
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancel(parent)
	stalled := &atomic.Bool{}
	timer := time.AfterFunc(c.timeout, func() { stalled.Store(true); cancel() })
	fail := func(err error) (*body, error) {
		timer.Stop()
		cancel()
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fail(&usageError{err: errors.Wrapf(err, "bad URL %q", c.base)})
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		if perr := parent.Err(); perr != nil {
			return fail(errors.Wrapf(perr, "%s", req.URL.Redacted()))
		}
		if stalled.Load() {
			return fail(errors.WithHint(errors.Newf("%s: no answer within %s", req.URL.Redacted(), c.timeout),
				"raise --timeout for a large or busy database"))
		}
		return fail(errors.WithHint(errors.Wrap(err, "reading a strata handler"),
			"is the agent running and serving its debug handler at that URL?"))
	}
	if resp.Header.Get(debughttp.HandlerHeader) == "" {
		resp.Body.Close()
		return fail(errors.WithHintf(errors.Newf("%s is not a strata debug handler (%s, without a %s header)",
			req.URL.Redacted(), resp.Status, debughttp.HandlerHeader),
			"give the URL the handler is mounted at, e.g. http://127.0.0.1:6060%s", debughttp.DefaultPrefix))
	}
	if resp.StatusCode != http.StatusOK {
		var eb struct {
			Error   string `json:"error"`
			Damaged bool   `json:"damaged"`
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if json.Unmarshal(b, &eb) != nil || eb.Error == "" {
			eb.Error = strings.TrimSpace(string(b))
		}
		err := error(&HTTPError{URL: req.URL.Redacted(), Status: resp.Status, Message: eb.Error, Damaged: eb.Damaged})
		if resp.StatusCode == http.StatusUnauthorized {
			if c.token == "" {
				err = errors.WithHintf(err, "set %s to the handler's token", envToken)
			} else {
				err = errors.WithHintf(err, "the handler refused the token in %s", envToken)
			}
		}
		return fail(err)
	}
	// The body's reads restart the timer; until then, the caller is not
	// waiting for the server.
	timer.Stop()
	return &body{resp: resp, timer: timer, timeout: c.timeout, stalled: stalled, parent: parent, cancel: cancel}, nil
}

// copy writes the body of endpoint's answer to out, whole or with an error.
func (c *remote) copy(out io.Writer, endpoint string, q url.Values) error {
	b, err := c.get(endpoint, q)
	if err != nil {
		return err
	}
	defer b.Close()
	if _, err := io.Copy(out, b); err != nil {
		return err
	}
	return b.complete()
}

// backup writes the handler's hot backup to w and returns its length,
// which must be the length the server announced.
func (c *remote) backup(w io.Writer) (int64, error) {
	b, err := c.get("backup", nil)
	if err != nil {
		return 0, err
	}
	defer b.Close()
	if b.resp.ContentLength < 0 {
		return 0, errors.Newf("%s: a backup without a Content-Length cannot be checked whole", b.resp.Request.URL.Redacted())
	}
	c.prog.set(0, b.resp.ContentLength)
	n, err := io.Copy(c.prog.writer(w), b)
	if err != nil {
		return n, err
	}
	return n, b.complete()
}

// fetch copies the handler's hot backup into a new temporary file, which
// the returned function removes: the local code then reads the same bytes
// the live database held.
func (c *remote) fetch() (path string, remove func(), err error) {
	f, err := os.CreateTemp("", "strata-remote-*.db")
	if err != nil {
		return "", nil, errors.Wrap(err, "a temporary file for the backup")
	}
	remove = func() { _ = os.Remove(f.Name()) }
	_, err = c.backup(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		remove()
		return "", nil, err
	}
	return f.Name(), remove, nil
}

// runRemote is `strata stats URL`.
func (o *statsOptions) runRemote(out io.Writer) error {
	c := newRemote(o.db, o.timeout)
	var q url.Values
	if o.session != "" {
		q = url.Values{"session": {o.session}}
	}
	if o.json {
		return c.copy(out, "stats", q)
	}
	b, err := c.get("stats", q)
	if err != nil {
		return err
	}
	defer b.Close()
	var st store.Stats
	if err := json.NewDecoder(b).Decode(&st); err != nil {
		return errors.Wrapf(err, "%s: stats", c.base)
	}
	return o.print(out, st)
}

// runRemote is `strata resume --db URL`.
func (o *resumeOptions) runRemote(out io.Writer) error {
	q := url.Values{"session": {o.session}, "marker": {o.marker}}
	if !o.json {
		q.Set("format", "text")
	}
	return newRemote(o.db, o.timeout).copy(out, "resume", q)
}

// runRemote is `strata backup URL DEST`: DEST is written like a backup of
// a file, through a temporary file renamed into place, and only when the
// whole announced length arrived.
func (o *backupOptions) runRemote(out io.Writer) error {
	c := newRemote(o.db, o.timeout)
	c.prog = o.progress() // on a terminal: bytes received of the announced length
	defer c.prog.finish()
	if o.dest == "-" {
		_, err := c.backup(out)
		return err
	}
	n, err := store.WriteFileAtomic(o.dest, 0o600, c.backup)
	c.prog.finish()
	if err != nil {
		return err
	}
	// The copy's own sessions: reading them also proves DEST opens.
	copied, err := openReadOnly(o.dest, o.timeout)
	if err != nil {
		return errors.Wrapf(err, "backup: reading the copy %s", o.dest)
	}
	ids, err := copied.Sessions()
	if cerr := copied.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Wrapf(err, "backup: reading the copy %s", o.dest)
	}
	return o.report(out, n, len(ids))
}

// runRemote is `strata verify URL`: the handler's hot backup, fetched into
// a temporary file, is checked the way a file is. The file is the agent's
// whole transcript: interrupted (Ctrl-C, SIGTERM), verify stops the
// transfer or the check and removes it before exiting.
func (o *verifyOptions) runRemote(ctx context.Context, out, errOut io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := newRemote(o.db, o.timeout)
	c.ctx = ctx
	path, remove, err := c.fetch()
	if err != nil {
		if ctx.Err() != nil {
			return errors.Wrap(err, "verify: interrupted")
		}
		return err
	}
	defer remove()
	local := *o
	local.db = path
	err = local.runParent(ctx, out, errOut)
	if ctx.Err() != nil {
		return errors.Wrapf(ctx.Err(), "verify: interrupted")
	}
	return err
}
