package debughttp

import (
	"cmp"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/internal/errmark"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// PagePath is the path, under the prefix, of the web page that shows the
// database to a person: Prefix+PagePath ("/debug/strata/ui/").
const PagePath = "/ui/"

// The page: plain HTML, CSS and JavaScript, served as they are.
//
//go:embed ui/index.html ui/app.js ui/style.css
var pageFiles embed.FS

// pageTypes maps each file of the page to its content type.
var pageTypes = map[string]string{
	"index.html": "text/html; charset=utf-8",
	"app.js":     "text/javascript; charset=utf-8",
	"style.css":  "text/css; charset=utf-8",
}

// pagePolicy is the page's Content-Security-Policy: its own script and
// style only, no inline script, no request to another origin. The page
// writes what it reads from the database as text, never as markup; the
// policy is the second line of defence.
const pagePolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// page answers a request for the page, or on the way to it, and reports
// whether it did; rest is the path below the prefix. The page's files hold
// no data of the database, so neither they nor the redirects to them ask
// for the token: a browser cannot send one when it navigates, and the page
// sends it with every request for data. A browser's GET of the index (one
// that accepts HTML) and PagePath without its slash are redirected to the
// page.
func (h *handler) page(w http.ResponseWriter, r *http.Request, rest string) bool {
	name, isPage := strings.CutPrefix(rest, PagePath)
	toPage := rest == strings.TrimSuffix(PagePath, "/") ||
		(rest == "" || rest == "/") && r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/html")
	switch {
	case !isPage && !toPage:
		return false
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, errors.Wrapf(ErrMethod, "%s (GET or HEAD only)", r.Method))
	case toPage:
		http.Redirect(w, r, h.prefix+PagePath, http.StatusSeeOther)
	default:
		h.servePage(w, r, name)
	}
	return true
}

// servePage answers a request for the page's file name.
func (h *handler) servePage(w http.ResponseWriter, r *http.Request, name string) {
	if name == "" {
		name = "index.html"
	}
	contentType, ok := pageTypes[name]
	if !ok {
		writeError(w, http.StatusNotFound, errors.Wrapf(ErrNoEndpoint, "%s (the page is %s%s)", r.URL.Path, h.prefix, PagePath))
		return
	}
	if r.URL.RawQuery != "" {
		writeError(w, http.StatusBadRequest, errors.Wrapf(ErrBadRequest, "query %q: the page takes none", r.URL.RawQuery))
		return
	}
	b, err := pageFiles.ReadFile("ui/" + name)
	if err != nil {
		writeError(w, http.StatusInternalServerError, errors.Wrap(err, "debughttp: the page"))
		return
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", pagePolicy)
	hd.Set("Referrer-Policy", "no-referrer")
	resp := &response{w: w, head: r.Method == http.MethodHead}
	_ = resp.whole(contentType, b) // a write error is the client gone
}

// shownOthers is how many of a session's invalid markers and checkpoints,
// and of its refusals, the session endpoint lists: the last ones (by id),
// unless asked for all of them (history=all). Every valid marker and
// checkpoint is listed; all of them are counted.
const shownOthers = 50

// sessionDoc is the JSON of {prefix}/session: what the page shows of one
// session, read from one snapshot.
type sessionDoc struct {
	Session     string                            `json:"id"`
	Info        store.Info                        `json:"info"`
	Roots       []rootDoc                         `json:"roots"`
	Tiers       []tierDoc                         `json:"tiers"`
	Tail        tailDoc                           `json:"tail"`
	Markers     statusList[marker.Marker]         `json:"markers"`
	Checkpoints statusList[checkpoint.Checkpoint] `json:"checkpoints"`
	Refusals    refusalList                       `json:"refusals"`
	Resume      resumeDoc                         `json:"resume"`
	// Open lists the calls and resources open at the head, in seq order.
	Open []tier.Open `json:"open"`
	// Forks are the sessions forked from this one (their origin is their
	// info's fork), in byte order: while one stays, prune keeps this one.
	Forks []string `json:"forks"`
	// ForksError says why Forks could not be listed: another session's
	// origin is damaged. Forks is then empty.
	ForksError string `json:"forks_error,omitempty"`
}

// rootDoc is a root of the frame.
type rootDoc struct {
	Node  uint64 `json:"node"`
	Depth int    `json:"depth"`
	From  uint64 `json:"from"`
	To    uint64 `json:"to"`
}

// tierDoc counts the nodes of one depth.
type tierDoc struct {
	Depth      int `json:"depth"`
	Nodes      int `json:"nodes"`
	Roots      int `json:"roots"`
	Superseded int `json:"superseded"`
}

// tailDoc is the uncompacted tail: seq From..To, Events of them (0 when
// the roots cover the whole log, and then From > To).
type tailDoc struct {
	From   uint64 `json:"from"`
	To     uint64 `json:"to"`
	Events uint64 `json:"events"`
}

// statusList counts a session's markers or checkpoints and lists every
// valid one and the last shownOthers invalid ones, in id order.
type statusList[T any] struct {
	Valid   int `json:"valid"`
	Invalid int `json:"invalid"`
	Shown   []T `json:"shown"`
}

// newStatusList counts all and keeps what statusList shows of it.
func newStatusList[T any](all []T, valid func(*T) bool, shown int) statusList[T] {
	l := statusList[T]{Shown: []T{}}
	for i := range all {
		if valid(&all[i]) {
			l.Valid++
		}
	}
	l.Invalid = len(all) - l.Valid
	skip := l.Invalid - shown // the oldest invalid ones
	for i := range all {
		if !valid(&all[i]) && skip > 0 {
			skip--
			continue
		}
		l.Shown = append(l.Shown, all[i])
	}
	return l
}

// refusalDoc is a refused compaction: the audit record, and its failed
// conditions as one line ("class:item,...").
type refusalDoc struct {
	store.Refusal
	Reasons string `json:"reasons"`
}

// refusalList counts a session's refusals and lists the last shownOthers.
type refusalList struct {
	Total int          `json:"total"`
	Shown []refusalDoc `json:"shown"`
}

// resumeDoc is what a resume of the session (the latest marker) gives,
// without its nodes and events: where it comes from, why, and the sha256
// of its text, as `strata resume --json` names them.
type resumeDoc struct {
	Source     string  `json:"source"`
	Marker     *uint64 `json:"marker"`
	Checkpoint *uint64 `json:"checkpoint"`
	Reason     string  `json:"reason"`
	SHA256     string  `json:"sha256"`
	Boundary   uint64  `json:"boundary"`
	Head       uint64  `json:"head_seq"`
	Nodes      int     `json:"nodes"`
	Events     int     `json:"events"`
	Bytes      int     `json:"bytes"`
}

// serveSession answers what the page shows of one session.
func serveSession(r *response, s *store.Snapshot, q url.Values) error {
	id := q.Get("session")
	if id == "" {
		return &ParamError{Param: "session", Value: id, Why: "required"}
	}
	if err := store.CheckSession(id); err != nil {
		return errmark.Mark(errors.Wrap(err, "session"), ErrBadRequest)
	}
	shown := shownOthers
	switch h := q.Get("history"); h {
	case "":
	case "all":
		shown = math.MaxInt
	default:
		return &ParamError{Param: "history", Value: h, Why: "not all"}
	}
	info, err := s.Info(id)
	if err != nil {
		return err
	}
	doc := sessionDoc{Session: id, Info: info, Roots: []rootDoc{}, Tiers: []tierDoc{},
		Tail: tailDoc{From: info.CompactedTo + 1, To: info.Head, Events: info.Head - info.CompactedTo}}

	spans, err := s.RootSpans(id)
	if err != nil {
		return err
	}
	tiers := map[int]*tierDoc{}
	tierOf := func(d tier.Depth) *tierDoc {
		t := tiers[int(d)]
		if t == nil {
			t = &tierDoc{Depth: int(d)}
			tiers[int(d)] = t
		}
		return t
	}
	for _, sp := range spans {
		doc.Roots = append(doc.Roots, rootDoc{Node: sp.Node, Depth: int(sp.Depth), From: sp.From, To: sp.To})
		tierOf(sp.Depth).Roots++
	}
	if err := s.Nodes(id, func(n tier.Node) error {
		t := tierOf(n.Depth)
		t.Nodes++
		if n.SupersededBy != 0 {
			t.Superseded++
		}
		return nil
	}); err != nil {
		return err
	}
	for d := range tiers {
		doc.Tiers = append(doc.Tiers, *tiers[d])
	}
	slices.SortFunc(doc.Tiers, func(a, b tierDoc) int { return cmp.Compare(b.Depth, a.Depth) }) // deepest first

	var markers []marker.Marker
	if err := s.Markers(id, func(m marker.Marker) error {
		markers = append(markers, m)
		return nil
	}); err != nil {
		return err
	}
	doc.Markers = newStatusList(markers, func(m *marker.Marker) bool { return m.Status == marker.StatusValid }, shown)
	var ckpts []checkpoint.Checkpoint
	if err := s.Checkpoints(id, func(c checkpoint.Checkpoint) error {
		ckpts = append(ckpts, c)
		return nil
	}); err != nil {
		return err
	}
	doc.Checkpoints = newStatusList(ckpts, (*checkpoint.Checkpoint).Usable, shown)
	doc.Refusals.Shown = []refusalDoc{}
	if err := s.Refusals(id, func(rf store.Refusal) error {
		doc.Refusals.Total++
		if rf.Failures == nil {
			rf.Failures = []marker.Failure{}
		}
		ie := marker.InvalidError{Failures: rf.Failures}
		doc.Refusals.Shown = append(doc.Refusals.Shown, refusalDoc{Refusal: rf, Reasons: ie.Reasons()})
		if len(doc.Refusals.Shown) > shown {
			doc.Refusals.Shown = slices.Delete(doc.Refusals.Shown, 0, 1)
		}
		return nil
	}); err != nil {
		return err
	}

	l, err := s.Ledger(id)
	if err != nil {
		return err
	}
	doc.Open = make([]tier.Open, 0, len(l.Open))
	for _, o := range l.Open {
		doc.Open = append(doc.Open, o)
	}
	slices.SortFunc(doc.Open, func(a, b tier.Open) int { return cmp.Compare(a.Seq, b.Seq) })

	// The forks are read from every session's origin: another session's
	// damage leaves them unknown, said so, not this view failed.
	switch forks, err := s.Forks(); {
	case err == nil:
		doc.Forks = append([]string{}, forks[id]...)
	case errors.Is(err, store.ErrCorrupt):
		doc.Forks, doc.ForksError = []string{}, err.Error()
	default:
		return err
	}

	ctx, err := s.Resume(id, store.Latest)
	if err != nil {
		return err
	}
	text := ctx.Text()
	sum := sha256.Sum256(text)
	doc.Resume = resumeDoc{Source: ctx.Source, Reason: ctx.Reason, SHA256: hex.EncodeToString(sum[:]),
		Boundary: ctx.Boundary, Head: ctx.Head, Nodes: len(ctx.Nodes), Events: len(ctx.Events), Bytes: len(text)}
	if ctx.Marker != 0 {
		doc.Resume.Marker = &ctx.Marker
	}
	if ctx.Checkpoint != 0 {
		doc.Resume.Checkpoint = &ctx.Checkpoint
	}

	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return r.whole(typeJSON, append(b, '\n'))
}
