package debughttp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/debughttp"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// claudeCodeTranscript is the real Claude Code session of
// ../shared/data/claude-code: 1,881 records, 560 events.
const claudeCodeTranscript = "../../shared/data/claude-code/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl"

// claudeCodePolicy compacts the real session as often as a small budget
// does: many L1 nodes, folded, so that most markers are history.
var claudeCodePolicy = compaction.Policy{EveryEvents: 5, Fold: 4}

// importClaudeCode appends the real Claude Code session to db as session
// id, record by record, compacting under policy after each, as an agent
// loop does; it skips the test when the transcript is absent.
func importClaudeCode(t testing.TB, db *store.DB, id string, policy compaction.Policy) {
	t.Helper()
	f, err := os.Open(claudeCodeTranscript)
	if err != nil {
		t.Skipf("the real Claude Code session: %v", err)
	}
	defer f.Close()
	ss, _, err := transcript.Read(transcript.ClaudeCode, f, transcript.Options{File: claudeCodeTranscript})
	if err != nil || len(ss) != 1 {
		t.Fatalf("%s: %d sessions, %v", claudeCodeTranscript, len(ss), err)
	}
	comp, err := compaction.NewCompactor(db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	evs := ss[0].Events
	for i := 0; i < len(evs); {
		j := i + 1
		for j < len(evs) && evs[j].Ref != "" && evs[j].Ref == evs[i].Ref {
			j++
		}
		if _, err := db.Append(id, evs[i:j]...); err != nil {
			t.Fatalf("%s: events %d..%d: %v", claudeCodeTranscript, i, j-1, err)
		}
		if _, err := comp.Run(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		i = j
	}
}

// eventsDoc is the events endpoint's JSON, as the tests read it.
type eventsDoc struct {
	Session string `json:"session"`
	Head    uint64 `json:"head_seq"`
	From    uint64 `json:"from"`
	To      uint64 `json:"to"`
	Before  uint64 `json:"before"`
	After   uint64 `json:"after"`
	Events  []struct {
		tier.EventJSON
		Opener    uint64 `json:"opener"`
		Open      bool   `json:"open"`
		TextBytes int    `json:"text_bytes"`
	} `json:"events"`
}

// getJSON gets url and decodes its JSON answer into v, failing the test
// unless the status is 200.
func getJSON(t testing.TB, url string, v any) {
	t.Helper()
	resp, body := get(t, http.MethodGet, url)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", url, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v\n%s", url, err, body)
	}
}

// allEvents returns every event of session.
func allEvents(t testing.TB, db *store.DB, session string) []tier.Event {
	t.Helper()
	var evs []tier.Event
	if err := db.View(func(s *store.Snapshot) error {
		return s.Events(session, 1, tier.MaxSeq, func(e tier.Event) error { evs = append(evs, e); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}

// seqsOf lists the seqs of an events answer.
func seqsOf(d eventsDoc) []uint64 {
	var out []uint64
	for _, e := range d.Events {
		out = append(out, *e.Seq)
	}
	return out
}

// The events endpoint: windows of the timeline at the head's end, from a
// seq and up to one; filters by text, by the item a refusal names and by
// failures; texts clipped unless asked whole; bad parameters refused.
func TestHandler_Events(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, store.Options{NoSync: true})
	const id = "s"
	long := strings.Repeat("x", debughttp.DefaultClip-1) + "é" + strings.Repeat("y", 900) // the clip falls inside é
	var evs []tier.Event
	for i := range 40 {
		evs = append(evs, tier.Event{Kind: tier.KindUser, Text: "turn " + strconv.Itoa(i)},
			tier.Event{Kind: tier.KindToolCall, ID: "c" + strconv.Itoa(i), Name: "bash", Text: "ls"},
			tier.Event{Kind: tier.KindToolResult, ID: "c" + strconv.Itoa(i), Failed: i%10 == 3, Text: "out " + strconv.Itoa(i)})
	}
	evs = append(evs, tier.Event{Kind: tier.KindRejected, Key: "approach/x", Text: "too slow"},
		tier.Event{Kind: tier.KindToolCall, ID: "c1", Name: "bash", Text: long}) // c1 opened again, left open
	if _, err := db.Append(id, evs...); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, db, debughttp.Options{})
	base := srv.URL + debughttp.DefaultPrefix + "/events?session=" + id
	stored := allEvents(t, db, id)
	head := uint64(len(stored)) // 122

	var d eventsDoc
	getJSON(t, base, &d)
	if d.Head != head || len(d.Events) != debughttp.DefaultEvents || *d.Events[0].Seq != head-99 || d.Before != head-100 || d.After != 0 {
		t.Fatalf("the head's window: head %d, %d events from seq %d, before %d after %d", d.Head, len(d.Events), *d.Events[0].Seq, d.Before, d.After)
	}
	last := d.Events[len(d.Events)-1]
	if *last.Seq != head || !last.Open || last.TextBytes != len(long) || len(last.Text) != debughttp.DefaultClip-1 || !strings.HasPrefix(long, last.Text) {
		t.Errorf("the last event: seq %d open %v, text of %d bytes (%d whole)", *last.Seq, last.Open, len(last.Text), last.TextBytes)
	}
	for _, e := range d.Events {
		want := stored[*e.Seq-1]
		if e.Kind != want.Kind.String() || (e.TextBytes == 0 && e.Text != want.Text) || e.ID != want.ID || e.Opener != want.Opener ||
			(e.OK != nil) != want.Kind.Resolves() || (e.OK != nil && *e.OK == want.Failed) || e.Time == "" {
			t.Errorf("seq %d: %+v, stored %+v", *e.Seq, e, want)
		}
		if e.Kind == "tool_call" && e.ID == "c1" && *e.Seq != head && e.Open {
			t.Errorf("seq %d: the first c1, resolved, said open", *e.Seq)
		}
	}
	getJSON(t, base+"&from="+strconv.FormatUint(head, 10)+"&clip=0", &d)
	if len(d.Events) != 1 || d.Events[0].Text != long || d.Events[0].TextBytes != 0 {
		t.Errorf("clip=0: %d events, text of %d bytes", len(d.Events), len(d.Events[0].Text))
	}
	getJSON(t, base+"&from=5&limit=3", &d)
	if got := seqsOf(d); len(got) != 3 || got[0] != 5 || got[2] != 7 || d.Before != 0 || d.After != head-7 || d.From != 5 {
		t.Errorf("from=5&limit=3: %v before %d after %d", got, d.Before, d.After)
	}
	getJSON(t, base+"&to=10&limit=4", &d)
	if got := seqsOf(d); len(got) != 4 || got[0] != 7 || got[3] != 10 || d.Before != 6 || d.After != 0 {
		t.Errorf("to=10&limit=4: %v before %d after %d", got, d.Before, d.After)
	}
	// Failures and rejections: the failed results (turns 3, 13, 23, 33) and
	// the rejection.
	getJSON(t, base+"&marked=1", &d)
	if got := seqsOf(d); len(got) != 5 || got[0] != 12 || got[1] != 42 || got[2] != 72 || got[3] != 102 || got[4] != 121 {
		t.Errorf("marked=1: %v", got)
	}
	getJSON(t, base+"&marked=1&limit=2", &d)
	if got := seqsOf(d); len(got) != 2 || got[0] != 102 || d.Before != 3 {
		t.Errorf("marked=1&limit=2: %v before %d", got, d.Before)
	}
	getJSON(t, base+"&marked=1&limit=2&from=1", &d)
	if got := seqsOf(d); len(got) != 2 || got[0] != 12 || d.After != 3 {
		t.Errorf("marked=1&limit=2&from=1: %v after %d", got, d.After)
	}
	// Text, case-insensitive, in any field.
	getJSON(t, base+"&q=OUT%2039", &d)
	if got := seqsOf(d); len(got) != 1 || got[0] != 120 {
		t.Errorf("q=OUT 39: %v", got)
	}
	// An item: an id or key; ID@SEQ one invocation (its call and result).
	getJSON(t, base+"&item=c1", &d)
	if got := seqsOf(d); len(got) != 3 || got[0] != 5 || got[2] != head {
		t.Errorf("item=c1: %v", got)
	}
	getJSON(t, base+"&item=c1%405", &d)
	if got := seqsOf(d); len(got) != 2 || got[0] != 5 || got[1] != 6 {
		t.Errorf("item=c1@5: %v", got)
	}
	getJSON(t, base+"&item=approach/x&from=80&to=121", &d)
	if got := seqsOf(d); len(got) != 1 || got[0] != 121 || d.From != 80 || d.To != 121 {
		t.Errorf("item=approach/x in 80..121: %v (%d..%d)", got, d.From, d.To)
	}

	for _, tc := range []struct {
		query  string
		status int
		says   string
	}{
		{"", 400, `session=\"\": required`},
		{"?session=absent", 404, "session not found"},
		{"?session=s&from=0", 400, `from=\"0\": not a seq`},
		{"?session=s&from=9&to=3", 400, "before from"},
		{"?session=s&limit=0", 400, "not a count"},
		{"?session=s&limit=1001", 400, "more than 1000"},
		{"?session=s&clip=x", 400, "not a length"},
		{"?session=s&marked=yes", 400, "not 1, 0, true or false"},
		{"?session=s&item=", 400, "empty"},
		{"?session=s&kind=user", 400, "unknown parameter"},
	} {
		if resp, body := get(t, http.MethodGet, srv.URL+debughttp.DefaultPrefix+"/events"+tc.query); resp.StatusCode != tc.status || !strings.Contains(string(body), tc.says) {
			t.Errorf("events%s: %s %s, want %d saying %s", tc.query, resp.Status, body, tc.status, tc.says)
		}
	}
}

// The nodes endpoint lists every node as the store has it, narrative and
// claims included; the sessions endpoint each session's times and open
// calls; the session endpoint the calls open at the head.
func TestHandler_NodesAndSessions(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, store.Options{NoSync: true})
	incident(t, db, "mig")
	if _, err := db.Append("open", tier.Event{Kind: tier.KindUser, Text: "go"},
		tier.Event{Kind: tier.KindToolCall, ID: "k1", Name: "bash", Text: "sleep 100"}); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, db, debughttp.Options{})
	base := srv.URL + debughttp.DefaultPrefix

	var nd struct {
		Session      string      `json:"session"`
		FrameVersion uint64      `json:"frame_version"`
		Nodes        []tier.Node `json:"nodes"`
	}
	getJSON(t, base+"/nodes?session=mig", &nd)
	var want []tier.Node
	if err := db.View(func(s *store.Snapshot) error {
		return s.Nodes("mig", func(n tier.Node) error { want = append(want, n); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	info, _ := db.Info("mig")
	if len(nd.Nodes) != len(want) || len(want) == 0 || nd.FrameVersion != info.FrameVersion {
		t.Fatalf("nodes: %d at frame %d, the store has %d at %d", len(nd.Nodes), nd.FrameVersion, len(want), info.FrameVersion)
	}
	claims := 0
	for i, n := range nd.Nodes {
		w := want[i]
		w.SpanHash = nil
		claims += n.Claims.Count()
		if n.ID != w.ID || n.Narrative != w.Narrative || !n.Claims.Equal(&w.Claims) || n.Parent != w.Parent || n.SupersededBy != w.SupersededBy {
			t.Errorf("node %d: %+v, the store has %+v", w.ID, n, w)
		}
	}
	if claims == 0 {
		t.Error("no node of the incident has a claim")
	}

	var sl struct {
		Sessions []struct {
			store.Info
			FirstTime string `json:"first_time"`
			LastTime  string `json:"last_time"`
			Open      int    `json:"open"`
		} `json:"sessions"`
	}
	getJSON(t, base+"/sessions", &sl)
	if len(sl.Sessions) != 2 {
		t.Fatalf("sessions: %+v", sl)
	}
	for _, s := range sl.Sessions {
		evs := allEvents(t, db, s.Session)
		first, last := evs[0].ToJSON(""), evs[len(evs)-1].ToJSON("")
		var wantOpen int
		if err := db.View(func(sn *store.Snapshot) error {
			l, err := sn.Ledger(s.Session)
			wantOpen = len(l.Open)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		i, _ := db.Info(s.Session)
		if s.Info != i || s.FirstTime != first.Time || s.LastTime != last.Time || s.Open != wantOpen {
			t.Errorf("session %s: %+v; want first %s last %s, %d open", s.Session, s, first.Time, last.Time, wantOpen)
		}
	}
	var sd struct {
		Open []tier.Open `json:"open"`
	}
	getJSON(t, base+"/session?session=open", &sd)
	if len(sd.Open) != 1 || sd.Open[0].ID != "k1" || sd.Open[0].Seq != 2 || sd.Open[0].Name != "bash" {
		t.Errorf("session open: %+v", sd.Open)
	}
	if resp, body := get(t, http.MethodGet, base+"/nodes?session=mig&depth=1"); resp.StatusCode != 400 || !strings.Contains(string(body), "unknown parameter") {
		t.Errorf("nodes?depth: %s %s", resp.Status, body)
	}
}

// The page on the real Claude Code session, compacted every 5 events: the
// timeline's window at the head (not the whole log), paging, search, each
// tool call with its output beneath it, failed calls marked, a long output
// collapsed and opened whole; the root nodes with their narrative labelled
// unchecked and their verified claims; the current markers, the folded ones
// as history on demand; the resumed context byte for byte. With
// -strata.screenshots it writes the pictures of docs/inspection.md.
func TestPage_ClaudeCodeSession(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true})
	const id = "claude-fa812bfe"
	importClaudeCode(t, db, id, claudeCodePolicy)
	ctx := newBrowser(t)
	stored := allEvents(t, db, id)
	head := len(stored)
	srv := serve(t, db, debughttp.Options{})
	page := srv.URL + debughttp.DefaultPrefix + debughttp.PagePath
	if err := chromedp.Do(ctx, chromedp.Navigate(page+"#session="+id)); err != nil {
		t.Fatal(err)
	}
	// The window at the head: the last 100 events, each as the store has it.
	waitFor(t, ctx, "the timeline's window at the head",
		textOf("#tl-where")+".includes('seq "+strconv.Itoa(head-99)+".."+strconv.Itoa(head)+" of "+strconv.Itoa(head)+"')")
	rows := eval[int](t, ctx, "document.querySelectorAll('#events [data-seq]').length")
	if rows != debughttp.DefaultEvents {
		t.Errorf("%d events drawn of %d; want the window of %d", rows, head, debughttp.DefaultEvents)
	}
	for _, e := range stored[head-debughttp.DefaultEvents:] {
		sel := "#ev-" + strconv.FormatUint(e.Seq, 10)
		want := e.ToJSON("")
		conds := "document.querySelector(" + js(sel) + ")?.dataset.kind === " + js(e.Kind.String())
		if want.Time != "" {
			conds += " && document.querySelector(" + js(sel+" time") + ")?.dateTime === " + js(want.Time)
		}
		if !eval[bool](t, ctx, conds) {
			t.Errorf("seq %d: not drawn as a %s at %s", e.Seq, e.Kind, want.Time)
		}
	}

	// A call's output beneath it; a failed call marked.
	var failed, call tier.Event
	for _, e := range stored[head-debughttp.DefaultEvents:] {
		if e.Kind == tier.KindToolResult && e.Failed && failed.Seq == 0 && e.Opener > uint64(head-debughttp.DefaultEvents) {
			failed = e
		}
	}
	for _, e := range stored {
		if e.Kind == tier.KindToolResult && e.Failed && failed.Seq == 0 {
			failed = e
		}
	}
	if failed.Seq == 0 {
		t.Fatal("the real session has no failed call")
	}
	// The failures only: every failed call, each beneath its call when the
	// call matches too, or with a link to it.
	if err := chromedp.Do(ctx, chromedp.Click("#tl-marked")); err != nil {
		t.Fatal(err)
	}
	nFailed := 0
	for _, e := range stored {
		if e.Failed || e.Kind.IsDisposition() {
			nFailed++
		}
	}
	waitFor(t, ctx, "the failed calls only", textOf("#tl-where")+".startsWith("+js(strconv.Itoa(nFailed)+" matching events")+") && "+
		"document.querySelectorAll('#events .event.marked').length === "+strconv.Itoa(nFailed))
	fs := "#ev-" + strconv.FormatUint(failed.Seq, 10)
	waitFor(t, ctx, "a failed call's result, linked to its call", textOf(fs+" .head")+".includes('failed call') && "+
		textOf(fs+" .head")+".includes('of the call at seq "+strconv.FormatUint(failed.Opener, 10)+"')")
	if err := chromedp.Do(ctx, chromedp.Click(fs+" .head a.seq")); err != nil {
		t.Fatal(err)
	}
	call = stored[failed.Opener-1]
	cs := "#ev-" + strconv.FormatUint(call.Seq, 10)
	waitFor(t, ctx, "the call, with its failed output beneath it",
		"document.querySelector("+js(cs+" > .result")+")?.id === "+js(fs[1:])+" && "+
			"document.querySelector("+js(cs)+").classList.contains('marked') && !document.getElementById('tl-marked').checked && "+
			textOf(cs+" .head")+".includes("+js(call.Name)+")")

	viewShot(t, ctx, cs, "FailedCall")

	// A long output, collapsed, opened whole.
	var big tier.Event
	for _, e := range stored {
		if e.Kind == tier.KindToolResult && len(e.Text) > debughttp.DefaultClip && big.Seq == 0 {
			big = e
		}
	}
	if big.Seq == 0 {
		t.Fatal("the real session has no output longer than the clip")
	}
	eval[bool](t, ctx, "(document.getElementById('tl-seq').value = '"+strconv.FormatUint(big.Seq, 10)+"', document.getElementById('tl-seq').dispatchEvent(new Event('change')), true)")
	bs := "#ev-" + strconv.FormatUint(big.Seq, 10)
	waitFor(t, ctx, "the long output, collapsed", "document.querySelector("+js(bs+" pre.collapsed")+") !== null && "+
		textOf(bs+" .expand")+".includes("+js(commas(len(big.Text))+" bytes")+")")
	if err := chromedp.Do(ctx, chromedp.Click(bs+" .expand")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the long output, whole", textOf(bs+" pre.text")+" === "+js(controlEscaped(big.Text)))

	// Search.
	eval[bool](t, ctx, "(document.getElementById('tl-q').value = 'compact', document.getElementById('tl-q').dispatchEvent(new Event('change')), true)")
	nMatch := 0
	for _, e := range stored {
		for _, s := range []string{e.Text, e.ID, e.Key, e.Name, e.By, e.Kind.String()} {
			if strings.Contains(strings.ToLower(s), "compact") {
				nMatch++
				break
			}
		}
	}
	waitFor(t, ctx, "the search's matches", textOf("#tl-where")+".startsWith("+js(strconv.Itoa(min(nMatch, 100))+" matching events")+")")

	// Summaries: the roots, each narrative labelled unchecked, each claim
	// listed under its class.
	var roots []tier.Node
	nodes := 0
	if err := db.View(func(s *store.Snapshot) error {
		return s.Nodes(id, func(n tier.Node) error {
			nodes++
			if n.IsRoot() {
				roots = append(roots, n)
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the root nodes", "document.querySelectorAll('#nodes > .node').length === "+strconv.Itoa(len(roots))+" && "+
		textOf("#summaries h3")+".includes('of "+strconv.Itoa(nodes)+" nodes')")
	for _, n := range roots {
		sel := "#node-" + strconv.FormatUint(n.ID, 10)
		b, _ := json.Marshal(n.Claims)
		var classes map[string][]json.RawMessage
		_ = json.Unmarshal(b, &classes)
		conds := []string{textOf(sel+" .unchecked-label") + ".includes('unchecked')", textOf(sel+" .verified-label") + ".includes('verified claims')"}
		for cls, items := range classes {
			conds = append(conds, "document.querySelectorAll("+js(sel+" [data-class="+cls+"] li")+").length === "+strconv.Itoa(len(items)))
		}
		waitFor(t, ctx, "node "+strconv.FormatUint(n.ID, 10)+"'s narrative and claims", strings.Join(conds, " && "))
	}

	// Markers: the valid ones shown, the history folded away.
	st, err := db.Stats(id)
	if err != nil {
		t.Fatal(err)
	}
	ss := st.Sessions[0]
	if ss.MarkersInvalid < 50 {
		t.Fatalf("%d invalid markers; the test wants a long history", ss.MarkersInvalid)
	}
	waitFor(t, ctx, "the current markers, the history closed",
		"document.querySelectorAll('#markers-s > table tbody tr').length === "+strconv.Itoa(ss.MarkersValid)+" && "+
			"!document.getElementById('marker-history').open && document.querySelectorAll('#markers .badge.invalid').length === 0")
	// The history on demand: the last 50, then all of it.
	if err := chromedp.Do(ctx, chromedp.Click("#marker-history summary")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the last 50 invalidated markers", "document.querySelectorAll('#marker-history tbody tr').length === 50")
	if err := chromedp.Do(ctx, chromedp.Click("#marker-history button.all")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "every invalidated marker", "document.querySelectorAll('#marker-history tbody tr').length === "+strconv.Itoa(ss.MarkersInvalid)+" && "+
		"document.querySelectorAll('#marker-history .badge.stale').length === "+strconv.Itoa(ss.MarkersInvalid))
	viewShot(t, ctx, "#markers", "Markers")
	if err := chromedp.Do(ctx, chromedp.Click("#marker-history summary")); err != nil {
		t.Fatal(err)
	}
	rc, err := db.Resume(id, store.Latest)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the resumed context, byte for byte", textOf("#context-text")+" === "+js(controlEscaped(string(rc.Text()))))
	eval[bool](t, ctx, "(document.getElementById('tl-q').value = '', document.getElementById('tl-q').dispatchEvent(new Event('change')), true)")
	waitFor(t, ctx, "the window at the head again", textOf("#tl-where")+".startsWith('100 events: seq "+strconv.Itoa(head-99)+"..') && "+
		textOf("#tl-nav")+".includes('following the head')")
	eval[bool](t, ctx, "(scrollTo(0, 0), true)")
	screenshot(t, ctx)
	viewShot(t, ctx, "body", "Top")
	viewShot(t, ctx, "#summaries", "Summaries")
}

// controlEscaped is s as the page shows it: each control character as its
// escape.
func controlEscaped(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0xad:
			b.WriteString(`\x` + strconv.FormatInt(int64(r)+0x100, 16)[1:])
		case (r >= 0x200b && r <= 0x200f) || (r >= 0x2028 && r <= 0x202e) || (r >= 0x2060 && r <= 0x2069) || r == 0xfeff:
			b.WriteString(`\u` + strconv.FormatInt(int64(r), 16))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// viewShot scrolls the element sel to the top of the window and, when
// -strata.screenshots is set, writes a PNG of the window there as
// TestName-name.png.
func viewShot(t *testing.T, ctx context.Context, sel, name string) {
	t.Helper()
	if *screenshots == "" {
		return
	}
	eval[bool](t, ctx, "(document.querySelector("+js(sel)+").scrollIntoView({block: 'start'}), true)")
	b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot at %s: %v", sel, err)
	}
	path := filepath.Join(*screenshots, t.Name()+"-"+name+".png")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(b))
}

// commas writes n as the page does, with a comma every three digits.
func commas(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
