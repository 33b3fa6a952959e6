package debughttp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/dump"
	"github.com/strata-go/strata/internal/errmark"
	"github.com/strata-go/strata/store"
)

// DefaultPrefix is the path under which Register mounts the handler, and
// New serves when Options.Prefix is empty.
const DefaultPrefix = "/debug/strata"

// HandlerHeader is the response header every answer of the handler
// carries, errors included, with the value HandlerVersion: a client that
// does not find it is not talking to a strata handler.
const HandlerHeader = "Strata-Handler"

// HandlerVersion is the value of HandlerHeader: the protocol's name and
// version.
const HandlerVersion = "debughttp/1"

// Options configure the handler. The zero value serves under DefaultPrefix
// without a token.
type Options struct {
	// Prefix is the path the endpoints hang under, without a trailing
	// slash: requests for Prefix+"/dump" and so on are answered, anything
	// else is a 404. Empty means DefaultPrefix; "/" serves at the root.
	Prefix string
	// Token, when not empty, must come with every request for data as
	// "Authorization: Bearer <Token>"; it is compared in constant time, and
	// a request without it gets 401 before anything is read. The page's
	// files (PagePath), which hold no data, are served without it. Empty
	// means no token is asked for: rely on binding to loopback, or wrap the
	// handler in your own authentication.
	Token string
}

// Viewer is the database a handler reads: a *store.DB, or anything whose
// View runs fn on one consistent snapshot — such as a file opened for each
// request and closed after it, as strata serve does, so that it holds the
// file's lock only while it answers.
type Viewer interface {
	View(fn func(*store.Snapshot) error) error
}

// handler serves one database.
type handler struct {
	db     Viewer
	prefix string
	token  [sha256.Size]byte // the token's hash: compared without leaking its length
	auth   bool
}

// New returns the handler serving db under opts.Prefix. It only reads: db
// may be open for writing, and the agent goes on appending while requests
// are served.
func New(db Viewer, opts Options) http.Handler {
	h := &handler{db: db, prefix: cleanPrefix(opts.Prefix)}
	if opts.Token != "" {
		h.auth, h.token = true, sha256.Sum256([]byte(opts.Token))
	}
	return h
}

// Register mounts New(db, opts) on mux under opts.Prefix (DefaultPrefix
// when empty): the pattern Prefix+"/" and its subtree.
func Register(mux *http.ServeMux, db Viewer, opts Options) {
	prefix := cleanPrefix(opts.Prefix)
	mux.Handle(prefix+"/", New(db, Options{Prefix: prefix, Token: opts.Token}))
}

// cleanPrefix returns p with one leading slash and no trailing one; "" for
// the root; DefaultPrefix for "".
func cleanPrefix(p string) string {
	if p == "" {
		return DefaultPrefix
	}
	p = strings.TrimRight(p, "/")
	if p != "" && !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return p
}

// ServeHTTP implements http.Handler.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set(HandlerHeader, HandlerVersion)
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	rest, ok := strings.CutPrefix(r.URL.Path, h.prefix)
	if ok && h.page(w, r, rest) {
		return
	}
	if h.auth && !h.authorized(r) {
		hd.Set("WWW-Authenticate", `Bearer realm="strata"`)
		writeError(w, http.StatusUnauthorized, ErrUnauthorized)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, errors.Wrapf(ErrMethod, "%s (GET or HEAD only)", r.Method))
		return
	}
	var serve func(*response, *store.Snapshot, url.Values) error
	var params []string
	switch {
	case !ok:
	case rest == "" || rest == "/":
		serve, params = h.index, nil
	case rest == "/dump":
		serve, params = serveDump, []string{"format", "raw", "session", "from", "to"}
	case rest == "/stats":
		serve, params = serveStats, []string{"session"}
	case rest == "/resume":
		serve, params = serveResume, []string{"session", "marker", "format"}
	case rest == "/backup":
		serve, params = serveBackup, nil
	case rest == "/session":
		serve, params = serveSession, []string{"session", "history"}
	case rest == "/sessions":
		serve, params = serveSessions, nil
	case rest == "/events":
		serve, params = serveEvents, []string{"session", "from", "to", "limit", "clip", "q", "item", "marked"}
	case rest == "/nodes":
		serve, params = serveNodes, []string{"session"}
	}
	if serve == nil {
		writeError(w, http.StatusNotFound, errors.Wrapf(ErrNoEndpoint, "%s (try %s/)", r.URL.Path, h.prefix))
		return
	}
	q, err := query(r.URL.RawQuery, params)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	resp := &response{w: w, head: r.Method == http.MethodHead, ctx: r.Context()}
	err = h.db.View(func(s *store.Snapshot) error { return serve(resp, s, q) })
	if resp.built != "" {
		// A backup built from the snapshot: sent now that the snapshot is
		// released, then removed with its directory.
		defer func() { _ = os.RemoveAll(filepath.Dir(resp.built)) }()
		if err == nil {
			err = resp.sendFile(resp.built)
		}
	}
	switch {
	case err == nil:
	case resp.started:
		// The status line is gone: cut the body, so that the client sees a
		// broken transfer rather than a complete-looking wrong answer.
		panic(http.ErrAbortHandler)
	default:
		writeError(w, status(err), err)
	}
}

// authorized reports whether r carries the token. The scheme name is
// case-insensitive (RFC 9110, 11.1): "bearer" is "Bearer".
func (h *handler) authorized(r *http.Request) bool {
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	ok = ok && strings.EqualFold(scheme, "Bearer")
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], h.token[:]) == 1 && ok
}

// query parses raw, refusing a parameter not in allowed, or given twice:
// a typo must not silently widen what is served.
func query(raw string, allowed []string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, errors.Wrapf(ErrBadRequest, "query %q: %v", raw, err)
	}
	for k, vs := range q {
		known := false
		for _, a := range allowed {
			known = known || a == k
		}
		switch {
		case !known:
			return nil, &ParamError{Param: k, Value: vs[0], Why: "unknown parameter" + allowedList(allowed)}
		case len(vs) > 1:
			return nil, &ParamError{Param: k, Value: vs[1], Why: "given more than once"}
		}
	}
	return q, nil
}

// allowedList says which parameters an endpoint takes.
func allowedList(allowed []string) string {
	if len(allowed) == 0 {
		return " (this endpoint takes none)"
	}
	return " (this endpoint takes " + strings.Join(allowed, ", ") + ")"
}

// status returns the HTTP status of an error from reading the database.
func status(err error) int {
	switch {
	case errors.Is(err, ErrBadRequest), errors.Is(err, store.ErrBadSession):
		return http.StatusBadRequest
	case errors.Is(err, store.ErrSessionNotFound), errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, store.ErrClosed), errors.Is(err, store.ErrLocked):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// writeError answers with err as {"error": "..."} and code, and
// "damaged": true when err is damage found in the database.
func writeError(w http.ResponseWriter, code int, err error) {
	b, _ := json.Marshal(errorBody{Error: err.Error(), Damaged: errors.Is(err, store.ErrCorrupt)}) // a string and a bool always encode
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// response is the writer an endpoint answers through: it knows whether the
// status line has gone out, and drops the body of a HEAD request.
type response struct {
	w       http.ResponseWriter
	head    bool
	started bool
	ctx     context.Context // the request's: ends when the client goes away
	// built is the path of a backup file the endpoint built from the
	// snapshot, in a temporary directory of its own: ServeHTTP sends it
	// once the snapshot is released, then removes the directory.
	built string
}

// start sets the content type (and the length, when known: -1 if not) and
// sends the status line.
func (r *response) start(contentType string, length int64) {
	r.w.Header().Set("Content-Type", contentType)
	if length >= 0 {
		r.w.Header().Set("Content-Length", strconv.FormatInt(length, 10))
	}
	r.w.WriteHeader(http.StatusOK)
	r.started = true
}

// Write implements io.Writer: the body, which starts the response with its
// content type already set.
func (r *response) Write(p []byte) (int, error) {
	if !r.started {
		r.w.WriteHeader(http.StatusOK)
		r.started = true
	}
	if r.head {
		return len(p), nil
	}
	return r.w.Write(p)
}

// json answers with v as indented JSON.
func (r *response) json(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return r.whole(typeJSON, append(b, '\n'))
}

// whole answers with b, its length known.
func (r *response) whole(contentType string, b []byte) error {
	r.start(contentType, int64(len(b)))
	_, err := r.Write(b)
	return err
}

// Content types of the answers.
const (
	typeJSON = "application/json; charset=utf-8"
	typeText = "text/plain; charset=utf-8"
	typeDot  = "text/vnd.graphviz; charset=utf-8"
	typeDB   = "application/octet-stream"
)

// indexDoc is the index's JSON.
type indexDoc struct {
	Handler       string            `json:"handler"`
	FormatVersion int               `json:"format_version"`
	Sessions      []listed          `json:"sessions"`
	Endpoints     map[string]string `json:"endpoints"`
}

// listed is a session as the index and the session list show it: its
// info, or for a session whose records are damaged its id and Damage, the
// error reading it, and no other field (a client reading head_seq finds
// none, not a zero). One session's damage is its own: the others are
// listed whole.
type listed struct {
	ID string `json:"id"`
	*store.Info
	Damage string `json:"damage,omitempty"`
}

// ownDamage returns err, or nil and it as a damaged session's listing when
// err is damage found reading session id.
func ownDamage(id string, it *listed, err error) error {
	if !errors.Is(err, store.ErrCorrupt) {
		return err
	}
	*it = listed{ID: id, Damage: err.Error()}
	return nil
}

// index lists the sessions and the endpoints.
func (h *handler) index(r *response, s *store.Snapshot, _ url.Values) error {
	format, err := s.FormatVersion()
	if err != nil {
		return err
	}
	ids, err := s.Sessions()
	if err != nil {
		return err
	}
	doc := indexDoc{Handler: HandlerVersion, FormatVersion: format, Sessions: []listed{}, Endpoints: map[string]string{
		"dump":     h.prefix + "/dump?format=json|text|dot&raw=1&session=ID&from=SEQ&to=SEQ",
		"stats":    h.prefix + "/stats?session=ID",
		"resume":   h.prefix + "/resume?session=ID&marker=ID|latest&format=json|text",
		"backup":   h.prefix + "/backup",
		"session":  h.prefix + "/session?session=ID&history=all",
		"sessions": h.prefix + "/sessions",
		"events":   h.prefix + "/events?session=ID&from=SEQ&to=SEQ&limit=N&clip=BYTES&q=TEXT&item=ID|KEY&marked=1",
		"nodes":    h.prefix + "/nodes?session=ID",
		"page":     h.prefix + PagePath,
	}}
	for _, id := range ids {
		info, err := s.Info(id)
		it := listed{ID: id, Info: &info}
		if err := ownDamage(id, &it, err); err != nil {
			return err
		}
		doc.Sessions = append(doc.Sessions, it)
	}
	// The endpoints' & left alone: the index is read by people.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	return r.whole(typeJSON, b.Bytes())
}

// serveDump streams the dump in the form asked for.
func serveDump(r *response, s *store.Snapshot, q url.Values) error {
	var opts dump.Options
	if q.Has("raw") {
		// "?raw" alone is refused, not read as false: it would silently
		// leave out the events asked for.
		v := q.Get("raw")
		raw, err := strconv.ParseBool(v)
		if err != nil {
			return &ParamError{Param: "raw", Value: v, Why: "not 1, 0, true or false"}
		}
		opts.Raw = raw
	}
	if q.Has("session") {
		opts.Session = q.Get("session")
		if err := store.CheckSession(opts.Session); err != nil {
			return errmark.Mark(errors.Wrap(err, "session"), ErrBadRequest)
		}
	}
	for _, p := range []struct {
		name string
		v    *uint64
	}{{"from", &opts.From}, {"to", &opts.To}} {
		if !q.Has(p.name) {
			continue
		}
		v := q.Get(p.name)
		seq, err := strconv.ParseUint(v, 10, 64)
		switch {
		case err != nil || seq == 0:
			return &ParamError{Param: p.name, Value: v, Why: "not a seq (1, 2, ...)"}
		case opts.Session == "":
			return &ParamError{Param: p.name, Value: v, Why: "a seq range needs session"}
		}
		*p.v = seq
	}
	if opts.From != 0 && opts.To != 0 && opts.From > opts.To {
		return &ParamError{Param: "to", Value: q.Get("to"), Why: "before from"}
	}
	render, contentType := dump.JSON, typeJSON
	switch f := q.Get("format"); f {
	case "", "json":
	case "text":
		render, contentType = dump.Text, typeText
	case "dot":
		if opts.Raw {
			return &ParamError{Param: "raw", Value: q.Get("raw"), Why: "the dot picture draws no events (as the CLI's --dot with --raw)"}
		}
		if opts.From != 0 || opts.To != 0 {
			return &ParamError{Param: "format", Value: "dot", Why: "the dot picture draws whole sessions, not a seq range"}
		}
		render, contentType = dump.Dot, typeDot
	default:
		return &ParamError{Param: "format", Value: f, Why: "not json, text or dot"}
	}
	if opts.Session != "" {
		// Before the status line: an unknown session is a 404.
		if _, err := s.Info(opts.Session); err != nil {
			return err
		}
	}
	r.w.Header().Set("Content-Type", contentType)
	if r.head {
		r.start(contentType, -1)
		return nil
	}
	return render(r, s, opts)
}

// serveStats answers what `strata stats --json [--session ID]` prints.
func serveStats(r *response, s *store.Snapshot, q url.Values) error {
	var ids []string
	if q.Has("session") {
		id := q.Get("session")
		if err := store.CheckSession(id); err != nil {
			return errmark.Mark(errors.Wrap(err, "session"), ErrBadRequest)
		}
		ids = []string{id}
	}
	st, err := s.Stats(ids...)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return r.whole(typeJSON, append(b, '\n'))
}

// serveResume answers what `strata resume [--json]` prints.
func serveResume(r *response, s *store.Snapshot, q url.Values) error {
	session := q.Get("session")
	if session == "" {
		return &ParamError{Param: "session", Value: session, Why: "required"}
	}
	if err := store.CheckSession(session); err != nil {
		return errmark.Mark(errors.Wrap(err, "session"), ErrBadRequest)
	}
	markerID := store.Latest
	if v := q.Get("marker"); v != "" && v != "latest" {
		id, err := strconv.ParseUint(v, 10, 64)
		if err != nil || id == 0 {
			return &ParamError{Param: "marker", Value: v, Why: "not a marker id (1, 2, ...) or latest"}
		}
		markerID = id
	}
	text := false
	switch f := q.Get("format"); f {
	case "", "json":
	case "text":
		text = true
	default:
		return &ParamError{Param: "format", Value: f, Why: "not json or text"}
	}
	ctx, err := s.Resume(session, markerID)
	if err != nil {
		return err
	}
	if text {
		return r.whole(typeText, ctx.Text())
	}
	b, err := ctx.JSON()
	if err != nil {
		return err
	}
	return r.whole(typeJSON, append(b, '\n'))
}

// serveBackup answers a copy of the database as of the snapshot: of a
// bbolt file, the file itself, streamed from the snapshot (Snapshot.WriteTo);
// of a database that is not a file (PostgreSQL), a new bbolt file of every
// session, the one `strata backup URL FILE` writes (Snapshot.CopyFile),
// built in a temporary directory (os.TempDir) and left for ServeHTTP to
// send once the snapshot is released. Its length is known only once it is
// built, so a HEAD builds it too.
func serveBackup(r *response, s *store.Snapshot, _ url.Values) error {
	if !s.IsFile() {
		dir, err := os.MkdirTemp("", "strata-backup-")
		if err != nil {
			return errors.Wrap(err, "debughttp: backup")
		}
		path := filepath.Join(dir, "backup.db")
		if _, err := s.CopyFile(r.ctx, path, false, store.CopyOptions{}); err != nil {
			_ = os.RemoveAll(dir)
			return err
		}
		r.built = path
		return nil
	}
	size := s.Size()
	r.startBackup(size)
	if r.head {
		return nil
	}
	n, err := s.WriteTo(r)
	if err == nil && n != size {
		err = errors.AssertionFailedf("debughttp: backup wrote %d bytes, announced %d", n, size)
	}
	return err
}

// startBackup sends the status line of a backup of size bytes.
func (r *response) startBackup(size int64) {
	r.w.Header().Set("Content-Disposition", `attachment; filename="strata-backup.db"`)
	r.start(typeDB, size)
}

// sendFile answers with the backup file at path, its length announced.
func (r *response) sendFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return errors.Wrap(err, "debughttp: backup")
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return errors.Wrap(err, "debughttp: backup")
	}
	r.startBackup(fi.Size())
	if r.head {
		return nil
	}
	n, err := io.Copy(r, f)
	if err == nil && n != fi.Size() {
		err = errors.AssertionFailedf("debughttp: backup sent %d bytes, announced %d", n, fi.Size())
	}
	return errors.Wrap(err, "debughttp: backup")
}
