package debughttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/debughttp"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// sessionDoc is the part of the session endpoint's JSON the tests read.
type sessionDoc struct {
	ID    string     `json:"id"`
	Info  store.Info `json:"info"`
	Roots []struct {
		Node  uint64 `json:"node"`
		Depth int    `json:"depth"`
		From  uint64 `json:"from"`
		To    uint64 `json:"to"`
	} `json:"roots"`
	Tiers []struct {
		Depth, Nodes, Roots, Superseded int
	} `json:"tiers"`
	Tail struct {
		From, To, Events uint64
	} `json:"tail"`
	Markers struct {
		Valid, Invalid int
		Shown          []struct {
			ID     uint64 `json:"id"`
			Status string `json:"status"`
			Reason string `json:"reason"`
		}
	} `json:"markers"`
	Checkpoints struct {
		Valid, Invalid int
		Shown          []json.RawMessage
	} `json:"checkpoints"`
	Refusals struct {
		Total int
		Shown []struct {
			ID       uint64           `json:"id"`
			Reasons  string           `json:"reasons"`
			Failures []marker.Failure `json:"failures"`
		}
	} `json:"refusals"`
	Resume struct {
		Source     string  `json:"source"`
		Marker     *uint64 `json:"marker"`
		Checkpoint *uint64 `json:"checkpoint"`
		Reason     string  `json:"reason"`
		SHA256     string  `json:"sha256"`
		Boundary   uint64  `json:"boundary"`
		Head       uint64  `json:"head_seq"`
		Events     int     `json:"events"`
	} `json:"resume"`
	Forks      []string `json:"forks"`
	ForksError string   `json:"forks_error"`
}

// lossy returns the lossy summarizer dropping classes.
func lossy(t testing.TB, classes ...string) compaction.Summarizer {
	t.Helper()
	l, err := compaction.NewLossy(classes...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The session endpoint says what the library says: the frame's roots and
// tiers, the tail, markers, checkpoints, refusals with their failures, and
// the latest resume's source and sha256.
func TestHandler_Session(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, store.Options{NoSync: true})
	incident(t, db, "mig")
	dbtest.ReplayIncident(t, db, "lossy", lossy(t, compaction.DropArtifacts))
	srv := serve(t, db, debughttp.Options{})
	base := srv.URL + debughttp.DefaultPrefix

	for _, id := range []string{"mig", "lossy"} {
		resp, body := get(t, http.MethodGet, base+"/session?session="+id)
		var doc sessionDoc
		if err := json.Unmarshal(body, &doc); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("session %s: %s %v\n%s", id, resp.Status, err, body)
		}
		st, err := db.Stats()
		if err != nil {
			t.Fatal(err)
		}
		var ss store.SessionStats
		for _, s := range st.Sessions {
			if s.ID == id {
				ss = s
			}
		}
		info, _ := db.Info(id)
		if doc.ID != id || doc.Info != info {
			t.Errorf("session %s: info %+v, want %+v", id, doc.Info, info)
		}
		if doc.Tail.From != info.CompactedTo+1 || doc.Tail.To != info.Head || doc.Tail.Events != info.Head-info.CompactedTo {
			t.Errorf("session %s: tail %+v, head %d compacted_to %d", id, doc.Tail, info.Head, info.CompactedTo)
		}
		if len(doc.Roots) != info.Roots {
			t.Errorf("session %s: %d roots, want %d", id, len(doc.Roots), info.Roots)
		}
		nodes, roots := map[int]int{}, 0
		for i, tr := range doc.Tiers {
			nodes[tr.Depth] = tr.Nodes
			roots += tr.Roots
			if i > 0 && tr.Depth >= doc.Tiers[i-1].Depth {
				t.Errorf("session %s: tiers not deepest first: %+v", id, doc.Tiers)
			}
		}
		if fmt.Sprint(nodes) != fmt.Sprint(ss.NodesByDepth) || roots != info.Roots {
			t.Errorf("session %s: nodes by depth %v (%d roots), stats say %v (%d)", id, nodes, roots, ss.NodesByDepth, info.Roots)
		}
		if doc.Markers.Valid != ss.MarkersValid || doc.Markers.Invalid != ss.MarkersInvalid ||
			doc.Checkpoints.Valid != ss.CheckpointsValid || doc.Checkpoints.Invalid != ss.CheckpointsInvalid ||
			doc.Refusals.Total != ss.Refusals || len(doc.Refusals.Shown) != ss.Refusals {
			t.Errorf("session %s: counts %+v %+v %+v, stats %+v", id, doc.Markers, doc.Checkpoints, doc.Refusals, ss)
		}
		var refusals []store.Refusal
		if err := db.View(func(s *store.Snapshot) error {
			return s.Refusals(id, func(r store.Refusal) error { refusals = append(refusals, r); return nil })
		}); err != nil {
			t.Fatal(err)
		}
		for i, r := range refusals {
			got := doc.Refusals.Shown[i]
			ie := marker.InvalidError{Failures: r.Failures}
			if got.ID != r.ID || got.Reasons != ie.Reasons() || fmt.Sprint(got.Failures) != fmt.Sprint(r.Failures) {
				t.Errorf("session %s: refusal %+v, want %+v", id, got, r)
			}
		}
		rc, err := db.Resume(id, store.Latest)
		if err != nil {
			t.Fatal(err)
		}
		if r := doc.Resume; r.Source != rc.Source || r.SHA256 != rc.SHA256() || r.Reason != rc.Reason ||
			r.Boundary != rc.Boundary || r.Head != rc.Head || r.Events != len(rc.Events) {
			t.Errorf("session %s: resume %+v, want %s %s %q", id, r, rc.Source, rc.SHA256(), rc.Reason)
		}
	}

	// The incident's extractive session has roots and valid markers; the
	// lossy one was refused, naming the artifact it dropped.
	_, body := get(t, http.MethodGet, base+"/session?session=lossy")
	if !strings.Contains(string(body), `"item": "migrations/003_down.sql"`) || !strings.Contains(string(body), `"source": "checkpoint"`) {
		t.Errorf("lossy session: %s", body)
	}

	for _, tc := range []struct {
		query  string
		status int
		says   string
	}{
		{"", 400, `session=\"\": required`},
		{"?session=absent", 404, "session not found"},
		{"?session=bad%01id", 400, "bad session id"},
		{"?session=mig&raw=1", 400, "unknown parameter (this endpoint takes session, history)"},
		{"?session=mig&history=some", 400, `history=\"some\": not all`},
	} {
		if resp, body := get(t, http.MethodGet, base+"/session"+tc.query); resp.StatusCode != tc.status || !strings.Contains(string(body), tc.says) {
			t.Errorf("session%s: %s %s, want %d saying %s", tc.query, resp.Status, body, tc.status, tc.says)
		}
	}
}

// forkedIncident returns a database holding the incident's session mig
// and two forks of it: try at its latest marker, back at the checkpoint
// its resume at marker 1, which a fold invalidated, falls back to.
func forkedIncident(t *testing.T) (db *store.DB, at, fb store.ForkResult) {
	t.Helper()
	db = dbtest.Open(t, store.Options{NoSync: true})
	incident(t, db, "mig")
	at, err := db.Fork("mig", store.Latest, "try")
	if err != nil {
		t.Fatal(err)
	}
	if fb, err = db.ForkFallback("mig", 1, "back"); err != nil {
		t.Fatal(err)
	}
	if fb.Checkpoint == 0 {
		t.Fatalf("the fork at mig's marker 1 took no checkpoint: %+v", fb)
	}
	return db, at, fb
}

// The session endpoint shows where a fork came from — its parent and
// point, a marker or the checkpoint of a fork at a fallback — and a
// parent's forks; the resume endpoint's JSON names a fork's origin.
func TestHandler_SessionOfAFork(t *testing.T) {
	t.Parallel()
	db, at, fb := forkedIncident(t)
	srv := serve(t, db, debughttp.Options{})
	base := srv.URL + debughttp.DefaultPrefix
	session := func(id string) sessionDoc {
		t.Helper()
		resp, body := get(t, http.MethodGet, base+"/session?session="+id)
		var doc sessionDoc
		if err := json.Unmarshal(body, &doc); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("session %s: %s %v\n%s", id, resp.Status, err, body)
		}
		return doc
	}
	if doc := session("mig"); doc.Info.Fork != nil || !slices.Equal(doc.Forks, []string{"back", "try"}) {
		t.Errorf("the parent's view: fork %+v, forks %v; want none, and back, try", doc.Info.Fork, doc.Forks)
	}
	for _, want := range []store.ForkResult{at, fb} {
		doc := session(want.Session)
		if doc.Info.Fork == nil || *doc.Info.Fork != want.ForkInfo || doc.Forks == nil || len(doc.Forks) != 0 {
			t.Errorf("the view of fork %s: origin %+v, forks %v; want %+v and none", want.Session, doc.Info.Fork, doc.Forks, want.ForkInfo)
		}
		_, body := get(t, http.MethodGet, base+"/resume?session="+want.Session)
		var rj struct {
			Fork *store.ForkInfo `json:"fork"`
		}
		if err := json.Unmarshal(body, &rj); err != nil || rj.Fork == nil || *rj.Fork != want.ForkInfo {
			t.Errorf("resume of fork %s: origin %+v (%v), want %+v", want.Session, rj.Fork, err, want.ForkInfo)
		}
	}
	if doc := session("back"); doc.Resume.Source != "checkpoint" || doc.Resume.Checkpoint == nil || *doc.Resume.Checkpoint != fb.Checkpoint {
		t.Errorf("the fork at a fallback resumes from %+v, want checkpoint %d", doc.Resume, fb.Checkpoint)
	}
}

// A session with more invalid markers than the endpoint lists: every valid
// one is listed, and the last invalid ones; all are counted.
func TestHandler_SessionListsTheLastInvalid(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, store.Options{NoSync: true})
	comp, err := compaction.NewCompactor(db, compaction.Options{Summarizer: compaction.Extractive{},
		Policy: compaction.Policy{EveryTurns: 1, Fold: 2}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 120 {
		if _, err := db.Append("long", tier.Event{Kind: tier.KindUser, Text: "turn " + strconv.Itoa(i)},
			tier.Event{Kind: tier.KindAssistant, Text: "done"}); err != nil {
			t.Fatal(err)
		}
		if _, err := comp.Run(context.Background(), "long"); err != nil {
			t.Fatal(err)
		}
	}
	var valid, invalid []uint64
	if err := db.View(func(s *store.Snapshot) error {
		return s.Markers("long", func(m marker.Marker) error {
			if m.Status == marker.StatusValid {
				valid = append(valid, m.ID)
			} else {
				invalid = append(invalid, m.ID)
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if len(invalid) <= 50 {
		t.Fatalf("%d invalid markers: the test needs more than the 50 listed", len(invalid))
	}
	srv := serve(t, db, debughttp.Options{})
	_, body := get(t, http.MethodGet, srv.URL+debughttp.DefaultPrefix+"/session?session=long")
	var doc sessionDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	var gotValid, gotInvalid []uint64
	for i, m := range doc.Markers.Shown {
		if i > 0 && m.ID <= doc.Markers.Shown[i-1].ID {
			t.Errorf("markers not in id order at %d", m.ID)
		}
		if m.Status == "valid" {
			gotValid = append(gotValid, m.ID)
		} else {
			gotInvalid = append(gotInvalid, m.ID)
		}
	}
	if doc.Markers.Valid != len(valid) || doc.Markers.Invalid != len(invalid) ||
		fmt.Sprint(gotValid) != fmt.Sprint(valid) || fmt.Sprint(gotInvalid) != fmt.Sprint(invalid[len(invalid)-50:]) {
		t.Errorf("markers: valid %d %v, invalid %d, shown invalid %v; want valid %v, the last 50 of %d invalid",
			doc.Markers.Valid, gotValid, doc.Markers.Invalid, gotInvalid, valid, len(invalid))
	}
	// history=all lists every one.
	_, body = get(t, http.MethodGet, srv.URL+debughttp.DefaultPrefix+"/session?session=long&history=all")
	var all sessionDoc
	if err := json.Unmarshal(body, &all); err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, m := range all.Markers.Shown {
		ids = append(ids, m.ID)
	}
	want := append(slices.Clone(valid), invalid...)
	slices.Sort(want)
	if fmt.Sprint(ids) != fmt.Sprint(want) ||
		all.Markers.Invalid != len(invalid) || len(all.Checkpoints.Shown) != all.Checkpoints.Valid+all.Checkpoints.Invalid {
		t.Errorf("history=all: markers %v, want %v; %d of %d checkpoints", ids, want, len(all.Checkpoints.Shown), all.Checkpoints.Valid+all.Checkpoints.Invalid)
	}
}

// The page's files are served without the token (they hold no data), with
// a policy that allows no inline script; the data endpoints still ask for
// it; a browser's GET of the index is sent to the page.
func TestHandler_Page(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, store.Options{NoSync: true})
	incident(t, db, "mig")
	srv := serve(t, db, debughttp.Options{Token: "s3cret"})
	base := srv.URL + debughttp.DefaultPrefix
	for _, tc := range []struct{ path, contentType, has string }{
		{"/ui/", "text/html; charset=utf-8", `<script src="app.js" defer></script>`},
		{"/ui/index.html", "text/html; charset=utf-8", "<title>strata</title>"},
		{"/ui/app.js", "text/javascript; charset=utf-8", "textContent"},
		{"/ui/style.css", "text/css; charset=utf-8", "#sessions"},
	} {
		resp, body := get(t, http.MethodGet, base+tc.path)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != tc.contentType || !strings.Contains(string(body), tc.has) {
			t.Errorf("%s: %s %q, %d bytes", tc.path, resp.Status, resp.Header.Get("Content-Type"), len(body))
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("%s: Content-Security-Policy %q", tc.path, csp)
		}
		if strings.Contains(string(body), "mig") {
			t.Errorf("%s: the page's file holds data of the database", tc.path)
		}
	}
	// HEAD: the length, no body.
	if resp, body := get(t, http.MethodHead, base+"/ui/app.js"); resp.StatusCode != http.StatusOK || resp.ContentLength <= 0 || len(body) != 0 {
		t.Errorf("HEAD app.js: %s, Content-Length %d, %d bytes", resp.Status, resp.ContentLength, len(body))
	}
	for _, tc := range []struct {
		method, path string
		status       int
		says         string
	}{
		{"GET", "/ui/nope.js", 404, "the page is /debug/strata/ui/"},
		{"GET", "/ui/app.js?x=1", 400, "the page takes none"},
		{"POST", "/ui/", 405, "POST (GET or HEAD only)"},
		{"GET", "/session?session=mig", 401, "missing or wrong bearer token"},
		{"GET", "/", 401, "missing or wrong bearer token"}, // the index, asked for as JSON
	} {
		if resp, body := get(t, tc.method, base+tc.path); resp.StatusCode != tc.status || !strings.Contains(string(body), tc.says) {
			t.Errorf("%s %s: %s %s, want %d saying %s", tc.method, tc.path, resp.Status, body, tc.status, tc.says)
		}
	}
	// A browser navigating to the index, or to the page without its slash,
	// lands on the page.
	for _, path := range []string{"/", "/ui"} {
		resp, _ := get(t, http.MethodGet, base+path, "Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
		if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != debughttp.DefaultPrefix+debughttp.PagePath {
			t.Errorf("GET %s as a browser: %s at %s", path, resp.Status, resp.Request.URL.Path)
		}
	}
	// The index names the page and the session endpoint.
	_, body := get(t, http.MethodGet, base+"/", "Authorization", "Bearer s3cret")
	if !strings.Contains(string(body), `"page": "/debug/strata/ui/"`) || !strings.Contains(string(body), `"session": "/debug/strata/session?session=ID&history=all"`) {
		t.Errorf("index: %s", body)
	}
}

// The page's script writes what it reads as text: it never hands a string
// to the HTML parser.
func TestPage_ScriptWritesNoMarkup(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("ui", "app.js"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "DOMParser", "createContextualFragment"} {
		if strings.Contains(string(b), sink) {
			t.Errorf("app.js uses %s", sink)
		}
	}
}

// The page in a real browser, against a live agent holding its database
// behind a token: it shows the refused compaction and what it left out,
// writes markup from the database as text, filters the sessions, and
// follows the agent as it appends and compacts.
func TestPage_LiveAgent(t *testing.T) {
	ctx := newBrowser(t)
	db := dbtest.Open(t, store.Options{NoSync: true})
	const agent = "agent-1"
	dbtest.ReplayIncident(t, db, agent, lossy(t, compaction.DropArtifacts))

	// A session whose id and refused artifact are markup.
	const hostile = `<img src=x onerror="document.title='pwned'">`
	const hostileKey = `<b id="pwned">report</b>.sql`
	if _, err := db.Append(hostile,
		tier.Event{Kind: tier.KindUser, Text: "Write the report."},
		tier.Event{Kind: tier.KindArtifact, Key: hostileKey, Text: "<script>document.title='pwned'</script>"},
		tier.Event{Kind: tier.KindAssistant, Text: "Done."},
		tier.Event{Kind: tier.KindUser, Text: "Thanks."},
	); err != nil {
		t.Fatal(err)
	}
	hc, err := compaction.NewCompactor(db, compaction.Options{Summarizer: lossy(t, compaction.DropArtifacts), Policy: compaction.Policy{EveryTurns: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := hc.Run(context.Background(), hostile); err != nil || len(res) == 0 || res[0].Node != 0 {
		t.Fatalf("the hostile session's compaction: %+v, %v; want it refused", res, err)
	}

	// A session last active in 2024, all of it done.
	if _, err := db.Append("old-chat", tier.Event{Kind: tier.KindUser, Text: "Hello.", Time: time.Date(2024, 5, 1, 9, 0, 0, 0, time.UTC).UnixNano()},
		tier.Event{Kind: tier.KindAssistant, Text: "Hi.", Time: time.Date(2024, 5, 1, 9, 0, 1, 0, time.UTC).UnixNano()}); err != nil {
		t.Fatal(err)
	}

	srv := serve(t, db, debughttp.Options{Token: "s3cret"})
	page := srv.URL + debughttp.DefaultPrefix + debughttp.PagePath

	// Without the token the page asks for it, and given it, lists the
	// sessions.
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the token form", "!document.getElementById('token-form').hidden && "+textOf("#status")+".includes('401')")
	if err := chromedp.Do(ctx, chromedp.SendKeys("#token", "s3cret"), chromedp.Click("#token-form button")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the sessions, with the token", textOf("#count")+" === '3 sessions' && document.getElementById('token-form').hidden")
	// A fresh load takes the token from the address once.
	eval[bool](t, ctx, "(sessionStorage.clear(), true)")
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(page+"#token=s3cret&session="+agent)); err != nil {
		t.Fatal(err)
	}

	// The refusals, each failure's item and detail, as the store has them.
	var refusals []store.Refusal
	if err := db.View(func(s *store.Snapshot) error {
		return s.Refusals(agent, func(r store.Refusal) error { refusals = append(refusals, r); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if len(refusals) == 0 {
		t.Fatal("the lossy replay was never refused")
	}
	conds := []string{textOf("#refusals h3") + ".includes('(" + strconv.Itoa(len(refusals)) + ")')"}
	for _, r := range refusals {
		for _, f := range r.Failures {
			conds = append(conds, textOf("#refusals")+".includes("+js(f.Item+" — "+f.Detail)+")")
		}
	}
	waitFor(t, ctx, "the refused compactions and what they left out", strings.Join(conds, " && "))
	waitFor(t, ctx, "the resume from the session's start checkpoint",
		textOf("#resume-source")+" === 'checkpoint 1' && "+textOf("#resume")+".includes('compaction of seq')")
	// The token left the address bar; the page keeps it for the tab.
	if h := eval[string](t, ctx, "location.hash"); strings.Contains(h, "s3cret") || h != "#session="+agent {
		t.Errorf("location.hash %q: the token is still in the address", h)
	}

	// Markup from the database is text.
	waitFor(t, ctx, "the hostile session in the list",
		"[...document.querySelectorAll('#sessions .id')].some(e => e.textContent === "+js(hostile)+")")
	eval[bool](t, ctx, "(location.hash = '#session=' + encodeURIComponent("+js(hostile)+"), true)")
	waitFor(t, ctx, "the hostile session's refusal, as text",
		textOf("#session-title")+" === "+js(hostile)+" && "+textOf("#refusals")+".includes("+js(hostileKey)+")")
	if bad := eval[string](t, ctx, `[document.title !== "strata" ? "title " + document.title : "",
		document.getElementById("pwned") ? "an element from the data" : "",
		document.querySelector("img, script:not([src])") || [...document.querySelectorAll("b")].some(e => e.textContent === "report") ? "markup from the data" : ""].join(" ").trim()`); bad != "" {
		t.Errorf("the page parsed the database's strings as markup: %s", bad)
	}

	// The filters: refused (the agent and the hostile session), with open
	// calls (the incident leaves one open), recent (not the 2024 chat), and
	// the search by id.
	listed := func(ids ...string) string {
		return "[...document.querySelectorAll('#sessions .id')].map(e => e.textContent).sort().join('|') === " + js(strings.Join(ids, "|"))
	}
	if err := chromedp.Do(ctx, chromedp.Click("#f-refused")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the refused sessions", textOf("#count")+" === '3 sessions, 2 match' && "+listed(hostile, agent))
	if err := chromedp.Do(ctx, chromedp.Click("#f-refused"), chromedp.Click("#f-open")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the sessions with open calls", textOf("#count")+" === '3 sessions, 1 match' && "+listed(agent)+" && "+
		textOf("#sessions")+".includes('1 open')")
	eval[bool](t, ctx, "(document.getElementById('f-open').click(), document.getElementById('f-recent').value = 'day', document.getElementById('f-recent').dispatchEvent(new Event('input')), true)")
	waitFor(t, ctx, "the sessions active in the last day", textOf("#count")+" === '3 sessions, 2 match' && "+listed(hostile, agent))
	eval[bool](t, ctx, "(document.getElementById('f-recent').value = '', document.getElementById('f-recent').dispatchEvent(new Event('input')), true)")
	if err := chromedp.Do(ctx, chromedp.SendKeys("#filter", "agent")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the filtered list", textOf("#count")+" === '3 sessions, 1 match' && document.querySelectorAll('#sessions li').length === 1")
	eval[bool](t, ctx, "(location.hash = '#session="+agent+"', true)")
	waitFor(t, ctx, "the agent's session again", textOf("#session-title")+" === '"+agent+"'")

	// A refusal's item links to the events of its span that name it. The
	// click lands where the link was measured: the view is drawn whole
	// first (its timeline, summaries and resumed context fill in above the
	// refusals as their answers come).
	r0 := refusals[0]
	item, naming := namingEvents(t, db, agent, r0)
	waitFor(t, ctx, "the agent's session drawn whole", textOf("#session-title")+" === '"+agent+"' && "+
		"document.getElementById('tl-where') !== null && "+textOf("#summaries h3")+".includes('root') && "+
		"document.getElementById('context-text')?.dataset.text !== undefined")
	if err := chromedp.Do(ctx, chromedp.Click("#refusal-"+strconv.FormatUint(r0.ID, 10)+" a.item")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the events the refusal names",
		"!document.getElementById('tl-filter').hidden && "+textOf("#tl-filter")+".includes("+js(item)+") && "+
			"[...document.querySelectorAll('#events [data-seq]')].map(e => e.dataset.seq).join(',') === "+js(strings.Join(naming, ",")))
	if err := chromedp.Do(ctx, chromedp.Click("#tl-filter button")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the timeline at the head", textOf("#tl-nav")+".includes('following the head')")

	// The agent appends: the head moves on the page, and the parts the
	// append left as they were are not redrawn (a click on one while it is
	// would be lost, a text opened in it closed): the refusals, another
	// session's row, the timeline's events before the new one.
	eval[bool](t, ctx, "(document.getElementById('filter').value = '', document.getElementById('filter').dispatchEvent(new Event('input')), true)")
	waitFor(t, ctx, "the whole list", "document.querySelectorAll('#sessions li').length === 3")
	kept := []string{
		"document.getElementById('refusal-" + strconv.FormatUint(r0.ID, 10) + "')",
		"document.querySelector('#sessions [data-session=old-chat]')",
		"document.getElementById('ev-" + eval[string](t, ctx, "document.querySelector('#events > li.event:last-child').dataset.seq") + "')",
	}
	for _, e := range kept {
		if !eval[bool](t, ctx, "(("+e+").strataKept = true)") {
			t.Fatalf("%s: not there", e)
		}
	}
	info, err := db.Info(agent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Append(agent, tier.Event{Kind: tier.KindUser, Text: "Ship it.\a Now\u202e\r"}); err != nil {
		t.Fatal(err)
	}
	head := info.Head + 1
	hs := strconv.FormatUint(head, 10)
	waitFor(t, ctx, "the appended event", textOf("#session-head")+".includes('head seq "+hs+"') && "+
		textOf("#sessions")+".includes('"+hs+" events')")
	// In the timeline, at the head, its control characters shown escaped.
	waitFor(t, ctx, "the appended event in the timeline, its controls escaped",
		textOf("#ev-"+hs+" pre.text")+" === "+js(`Ship it.\x07 Now\u202e\r`)+" && "+
			"[...document.querySelectorAll('#ev-"+hs+" .ctl')].map(e => e.textContent).join(' ') === "+js(`\x07 \u202e \r`))
	for _, e := range kept {
		if !eval[bool](t, ctx, "("+e+")?.strataKept === true") {
			t.Errorf("the append redrew %s, which it left as it was", e)
		}
	}

	// The agent compacts with a summarizer that keeps every fact: the page
	// shows the new roots and the resume from the latest marker.
	comp, err := compaction.NewCompactor(db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: compaction.Policy{EveryTurns: 2, Fold: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := comp.Run(context.Background(), agent); err != nil {
		t.Fatal(err)
	}
	rc, err := db.Resume(agent, store.Latest)
	if err != nil {
		t.Fatal(err)
	}
	info, _ = db.Info(agent)
	if rc.Source != "marker" || info.Roots == 0 {
		t.Fatalf("after the compaction: resume from %s, %d roots; want a marker", rc.Source, info.Roots)
	}
	waitFor(t, ctx, "the compaction's marker and roots",
		textOf("#resume-source")+" === 'marker "+strconv.FormatUint(rc.Marker, 10)+"' && "+
			textOf("#resume-sha")+" === '"+rc.SHA256()+"' && "+
			textOf("#frame h3")+".includes('"+strconv.Itoa(info.Roots)+" root') && "+
			textOf("#markers")+".includes('valid')")
	// The context text: the bytes resume gives, its controls escaped.
	waitFor(t, ctx, "the context text", textOf("#context-text")+" === "+js(controlEscaped(string(rc.Text()))))
	screenshot(t, ctx)
}

// namingEvents returns r's first failed item and the seqs of the events of
// r's span that name it: what the refusal's link shows.
func namingEvents(t *testing.T, db *store.DB, session string, r store.Refusal) (item string, seqs []string) {
	t.Helper()
	item = r.Failures[0].Item
	for _, e := range allEvents(t, db, session) {
		if e.Seq >= r.From && e.Seq <= r.To && (e.ID == item || e.Key == item) {
			seqs = append(seqs, strconv.FormatUint(e.Seq, 10))
		}
	}
	if len(seqs) == 0 {
		t.Fatalf("no event of seq %d..%d names %s", r.From, r.To, item)
	}
	return item, seqs
}

// A refusal's link clicked while the poll's request for the window at the
// head is on its way shows the events the refusal names: the page draws the
// answer to the window asked for last, whichever answer arrives last.
func TestPage_RefusalLinkWhileTheTimelineLoads(t *testing.T) {
	ctx := newBrowser(t)
	db := dbtest.Open(t, store.Options{NoSync: true})
	const agent = "agent-1"
	dbtest.ReplayIncident(t, db, agent, lossy(t, compaction.DropArtifacts))
	var r0 store.Refusal
	if err := db.View(func(s *store.Snapshot) error {
		return s.Refusals(agent, func(r store.Refusal) error { r0 = r; return io.EOF })
	}); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if r0.ID == 0 {
		t.Fatal("the lossy replay was never refused")
	}
	item, naming := namingEvents(t, db, agent, r0)

	// The page's first request for a window without an item (the poll's, at
	// the head) is held until the test lets it go.
	mux := http.NewServeMux()
	debughttp.Register(mux, db, debughttp.Options{})
	held, release := make(chan struct{}), make(chan struct{})
	var first, let sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if path.Base(r.URL.Path) == "events" && !r.URL.Query().Has("item") {
			hold := false
			first.Do(func() { hold = true })
			if hold {
				close(held)
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	letGo := func() { let.Do(func() { close(release) }) }
	t.Cleanup(letGo) // before srv.Close, which waits for the held request

	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+debughttp.DefaultPrefix+debughttp.PagePath+"#session="+agent)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the page never asked for its timeline")
	}
	if err := chromedp.Do(ctx, chromedp.Click("#refusal-"+strconv.FormatUint(r0.ID, 10)+" a.item")); err != nil {
		t.Fatal(err)
	}
	named := "[...document.querySelectorAll('#events [data-seq]')].map(e => e.dataset.seq).join(',') === " + js(strings.Join(naming, ","))
	waitFor(t, ctx, "the events the refusal names", textOf("#tl-filter")+".includes("+js(item)+") && "+named)
	// The held window at the head arrives after the item's; the poll that
	// asked for it ends with the status.
	letGo()
	waitFor(t, ctx, "the poll that asked for the window at the head ended", textOf("#status")+".startsWith('live')")
	if !eval[bool](t, ctx, "!document.getElementById('tl-filter').hidden && "+named) {
		t.Errorf("the window at the head, asked for before the click, replaced the events the refusal names: %s",
			eval[string](t, ctx, textOf("#tl-where")))
	}
}

// realSessions are the recorded sessions the page is shown on: a long
// SWE-bench run, chats and airline tasks.
var realSessions = []string{
	"mini_pylint-dev__pylint-7080", "mini_django__django-16560", "aider_20240806085514",
	"aider_20240809193247", "tau_gpt-4o-airline_task0_trial0", "swea_pydicom__pydicom-1458",
}

// The page on real agent sessions, replayed with a summarizer that drops
// the open calls (some spans are refused, others committed and folded):
// each session's frame, markers and refusals as the store has them. With
// -strata.screenshots it writes the picture docs/inspection.md shows.
func TestPage_RealSessions(t *testing.T) {
	all := dbtest.RealSessions(t)
	ctx := newBrowser(t)
	db := dbtest.Open(t, store.Options{NoSync: true})
	comp, err := compaction.NewCompactor(db, compaction.Options{Summarizer: lossy(t, compaction.DropOpen),
		Policy: compaction.Policy{EveryTurns: 4, EveryEvents: 40, Fold: 3}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range realSessions {
		path := filepath.Join(filepath.Dir(all[0]), name+".jsonl")
		f, err := os.Open(path)
		if err != nil {
			t.Skipf("real session %s: %v", name, err)
		}
		rd := tier.NewReader(f, path, tier.Limits{})
		for {
			rec, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Append(name, rec.Event); err != nil {
				t.Fatal(err)
			}
			if _, err := comp.Run(context.Background(), name); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
	}
	srv := serve(t, db, debughttp.Options{})
	page := srv.URL + debughttp.DefaultPrefix + debughttp.PagePath
	shown := realSessions[0]
	if err := chromedp.Do(ctx, chromedp.Navigate(page+"#session="+shown)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "every session in the list", textOf("#count")+" === '"+strconv.Itoa(len(realSessions))+" sessions'")

	for _, id := range realSessions {
		st, err := db.Stats()
		if err != nil {
			t.Fatal(err)
		}
		var ss store.SessionStats
		for _, s := range st.Sessions {
			if s.ID == id {
				ss = s
			}
		}
		var items []string
		if err := db.View(func(s *store.Snapshot) error {
			return s.Refusals(id, func(r store.Refusal) error {
				for _, f := range r.Failures {
					items = append(items, f.Item)
				}
				return nil
			})
		}); err != nil {
			t.Fatal(err)
		}
		eval[bool](t, ctx, "(location.hash = '#session="+id+"', true)")
		conds := []string{
			textOf("#session-title") + " === '" + id + "'",
			textOf("#markers h3") + ".includes('" + fmt.Sprintf("(%d valid, %d invalid)", ss.MarkersValid, ss.MarkersInvalid) + "')",
			textOf("#refusals h3") + ".includes('(" + strconv.Itoa(ss.Refusals) + ")')",
		}
		for d, n := range ss.NodesByDepth {
			conds = append(conds, "[...document.querySelectorAll('#frame .tiers span')].map(e => e.textContent).join('|').includes("+
				js(fmt.Sprintf("L%d|%d node", d, n))+")")
		}
		for _, it := range items {
			conds = append(conds, textOf("#refusals")+".includes("+js(it)+")")
		}
		waitFor(t, ctx, "session "+id+" as the store has it", strings.Join(conds, " && "))
	}
	eval[bool](t, ctx, "(location.hash = '#session="+shown+"', true)")
	waitFor(t, ctx, "the session shown in the picture", textOf("#session-title")+" === '"+shown+"'")
	screenshot(t, ctx)
}

// The page in a real browser shows a fork's parent and fork point, each a
// link, and on the parent's view its forks.
func TestPage_Forks(t *testing.T) {
	ctx := newBrowser(t)
	db, at, fb := forkedIncident(t)
	srv := serve(t, db, debughttp.Options{})
	page := srv.URL + debughttp.DefaultPrefix + debughttp.PagePath
	if err := chromedp.Do(ctx, chromedp.Navigate(page+"#session=try")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the fork's parent and point", textOf("#lineage")+" === "+
		js(fmt.Sprintf("fork of mig at seq %d, marker %d", at.At, at.Marker)))
	if err := chromedp.Do(ctx, chromedp.Click("#lineage a.session-link")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the parent's forks", textOf("#session-title")+" === 'mig' && "+textOf("#lineage")+" === '2 forks: back, try'")
	if err := chromedp.Do(ctx, chromedp.Click("#lineage a.session-link")); err != nil { // back
		t.Fatal(err)
	}
	waitFor(t, ctx, "the fork at a fallback's checkpoint", textOf("#session-title")+" === 'back' && "+textOf("#lineage")+" === "+
		js(fmt.Sprintf("fork of mig at seq %d, checkpoint %d (marker 1 not valid)", fb.At, fb.Checkpoint))+" && "+
		textOf("#resume-source")+" === "+js(fmt.Sprintf("checkpoint %d", fb.Checkpoint)))
	if eval[bool](t, ctx, "document.getElementById('lineage').hidden") {
		t.Error("the lineage of a fork is hidden")
	}
	screenshot(t, ctx)
}

// damagedSibling returns a database of sessions "a" and "c", whole, and "b",
// whose state record is damaged (its bytes overwritten in the file),
// opened read-only.
func damagedSibling(t *testing.T) *store.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "damaged.db")
	db, err := store.Open(path, store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if _, err := db.Append(id, tier.Event{Kind: tier.KindUser, Text: "Task of " + id + "."},
			tier.Event{Kind: tier.KindAssistant, Text: "On it."}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// The file's layout (backend/boltfile): a session's bucket "s/ID", its
	// state record under the key 0xFF.
	raw, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("s/b")).Put([]byte{0xFF}, []byte("not a state record"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// One session's damage is its own: the list names the damaged session as
// damaged and lists the others whole; another session's view is served,
// its forks said to be unknown; the damaged session's own view is the
// damage.
func TestHandler_DamagedSessionIsItsOwn(t *testing.T) {
	t.Parallel()
	base := serve(t, damagedSibling(t), debughttp.Options{}).URL + debughttp.DefaultPrefix
	resp, body := get(t, http.MethodGet, base+"/sessions")
	var list struct {
		Sessions []struct {
			ID     string `json:"id"`
			Head   uint64 `json:"head_seq"`
			Damage string `json:"damage"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal(body, &list); err != nil || resp.StatusCode != http.StatusOK || len(list.Sessions) != 3 {
		t.Fatalf("sessions: %s %s", resp.Status, body)
	}
	for _, it := range list.Sessions {
		if damaged := it.ID == "b"; damaged != (it.Damage != "") || !damaged && it.Head != 2 || damaged && it.Head != 0 {
			t.Errorf("sessions: %+v; want only b damaged, the others whole", it)
		}
	}
	if d := list.Sessions[1].Damage; !strings.Contains(d, `session "b" state`) {
		t.Errorf("b's damage %q does not name the record", d)
	}
	// The damaged session is its id and damage alone, in the list and the
	// index: no zero head_seq a client could take for an empty session.
	for _, path := range []string{"/sessions", "/"} {
		_, body := get(t, http.MethodGet, base+path)
		var doc struct{ Sessions []map[string]any }
		if err := json.Unmarshal(body, &doc); err != nil || len(doc.Sessions) != 3 {
			t.Fatalf("%s: %s", path, body)
		}
		if b := doc.Sessions[1]; len(b) != 2 || b["id"] != "b" || b["damage"] == nil {
			t.Errorf("%s: b is %v; want its id and damage alone", path, b)
		}
		if c := doc.Sessions[2]; c["id"] != "c" || c["head_seq"] != float64(2) || c["damage"] != nil {
			t.Errorf("%s: c is %v; want it whole", path, c)
		}
	}
	resp, body = get(t, http.MethodGet, base+"/session?session=a")
	var doc sessionDoc
	if err := json.Unmarshal(body, &doc); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("session a: %s %s", resp.Status, body)
	}
	if doc.Info.Head != 2 || doc.Forks == nil || len(doc.Forks) != 0 || !strings.Contains(doc.ForksError, `session "b" state`) {
		t.Errorf("session a: head %d, forks %v, forks_error %q; want its view, the forks unknown for b's damage", doc.Info.Head, doc.Forks, doc.ForksError)
	}
	resp, body = get(t, http.MethodGet, base+"/session?session=b")
	var e struct {
		Damaged bool `json:"damaged"`
	}
	if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != http.StatusInternalServerError || !e.Damaged {
		t.Errorf("session b: %s %s; want 500, damaged", resp.Status, body)
	}
}

// The page in a real browser beside a damaged session: the list marks it
// damaged, another session's view is whole but for its forks, and the
// damaged session's view says what is damaged.
func TestPage_DamagedSession(t *testing.T) {
	ctx := newBrowser(t)
	srv := serve(t, damagedSibling(t), debughttp.Options{})
	page := srv.URL + debughttp.DefaultPrefix + debughttp.PagePath
	if err := chromedp.Do(ctx, chromedp.Navigate(page+"#session=a")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "a's view beside b's damage", textOf("#session-title")+" === 'a' && "+
		textOf("#session-head")+".includes('head seq 2') && "+
		textOf("#lineage")+".startsWith('forks unknown: ') && "+textOf("#lineage")+".includes('session \"b\" state') && "+
		textOf("#count")+" === '3 sessions' && "+
		textOf("#sessions [data-session=b]")+" === 'b damaged' && "+
		"(document.querySelector('#sessions [data-session=b] .badge')?.title ?? '').includes('session \"b\" state') && "+
		textOf("#sessions [data-session=c]")+".includes('2 events')")
	if err := chromedp.Do(ctx, chromedp.Click("#sessions [data-session=b]")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "b's view: the damage", textOf("#session-error")+".startsWith('Session \"b\": 500') && "+
		textOf("#session-error")+".includes('damaged')")
	if err := chromedp.Do(ctx, chromedp.Click("#sessions [data-session=c]")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "c's view after b's", textOf("#session-title")+" === 'c' && "+textOf("#session-head")+".includes('head seq 2')")
	// A session that is not there says so the same way.
	eval[bool](t, ctx, "(location.hash = '#session=nope', true)")
	waitFor(t, ctx, "an unknown session's view", textOf("#session-error")+".startsWith('Session \"nope\": 404')")
	screenshot(t, ctx)
}
