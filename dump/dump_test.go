package dump_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/dump"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// incidentDB replays the seed's incident into session, compacting every 2
// turns with the summarizer named (folding pairs of roots), as it goes.
func incidentDB(t *testing.T, db *store.DB, session, summarizer string) {
	t.Helper()
	sum, err := compaction.New(summarizer, []string{compaction.DropNegatives, compaction.DropArtifacts})
	if err != nil {
		t.Fatal(err)
	}
	dbtest.ReplayIncident(t, db, session, sum)
}

// render runs one renderer in a View.
func render(t *testing.T, db *store.DB, fn func(io.Writer, *store.Snapshot, dump.Options) error, opts dump.Options) string {
	t.Helper()
	var b bytes.Buffer
	if err := db.View(func(s *store.Snapshot) error { return fn(&b, s, opts) }); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestJSON_Document(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, store.Options{NoSync: true})
	incidentDB(t, db, "mig", "extractive")
	incidentDB(t, db, "lossy", "lossy")
	var doc struct {
		FormatVersion int `json:"format_version"`
		Sessions      []struct {
			ID      string            `json:"id"`
			HeadSeq uint64            `json:"head_seq"`
			Nodes   []json.RawMessage `json:"nodes"`
			Audit   []json.RawMessage `json:"audit"`
			Events  []json.RawMessage `json:"events"`
		} `json:"sessions"`
	}
	out := render(t, db, dump.JSON, dump.Options{Raw: true})
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(doc.Sessions) != 2 || doc.Sessions[0].ID != "lossy" || doc.Sessions[1].ID != "mig" {
		t.Fatalf("sessions %+v", doc.Sessions)
	}
	for _, s := range doc.Sessions {
		if uint64(len(s.Events)) != s.HeadSeq || s.HeadSeq != 41 {
			t.Errorf("session %s: %d events, head_seq %d", s.ID, len(s.Events), s.HeadSeq)
		}
	}
	if len(doc.Sessions[0].Nodes) != 0 || len(doc.Sessions[0].Audit) == 0 {
		t.Errorf("lossy: %d nodes, %d refusals", len(doc.Sessions[0].Nodes), len(doc.Sessions[0].Audit))
	}
	if len(doc.Sessions[1].Nodes) == 0 {
		t.Errorf("extractive: no nodes")
	}
	// One session, without --raw: only it, and no events.
	one := render(t, db, dump.JSON, dump.Options{Session: "mig"})
	if strings.Contains(one, `"lossy"`) || strings.Contains(one, `"events"`) || !strings.Contains(one, `"id": "mig"`) {
		t.Errorf("dump of session mig:\n%s", one)
	}
}

// Every session's object begins with the same members, id, head_seq and
// turn, in the whole dump and in a range's, byte for byte; then "frame" in
// the whole dump, "from" in a range's.
func TestJSON_SessionHeader(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, store.Options{NoSync: true})
	incidentDB(t, db, "mig", "extractive")
	info, err := db.Info("mig")
	if err != nil {
		t.Fatal(err)
	}
	header := fmt.Sprintf("\"sessions\": [\n    {\n      \"id\": \"mig\",\n      \"head_seq\": %d,\n      \"turn\": %d,\n      ", info.Head, info.Turn)
	for _, c := range []struct {
		opts dump.Options
		next string
	}{
		{dump.Options{}, `"frame": `},
		{dump.Options{Raw: true}, `"frame": `},
		{dump.Options{Session: "mig", From: 14, To: 20}, `"from": 14,`},
		{dump.Options{Session: "mig", To: 3}, `"from": 1,`},
	} {
		out := render(t, db, dump.JSON, c.opts)
		if !strings.Contains(out, header+c.next) {
			t.Errorf("dump %+v: the session's object does not begin with\n%s%s\n%s", c.opts, header, c.next, out[:min(len(out), 400)])
		}
		if !json.Valid([]byte(out)) {
			t.Errorf("dump %+v: not JSON", c.opts)
		}
	}
}

// A session that is not there, or not a session id, fails before a byte is
// written, with the store's error.
func TestRender_BadSession(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, store.Options{NoSync: true})
	incidentDB(t, db, "mig", "extractive")
	for _, fn := range []func(io.Writer, *store.Snapshot, dump.Options) error{dump.JSON, dump.Text, dump.Dot} {
		for session, want := range map[string]error{"absent": store.ErrSessionNotFound, "bad\x01id": store.ErrBadSession} {
			var b bytes.Buffer
			err := db.View(func(s *store.Snapshot) error { return fn(&b, s, dump.Options{Session: session}) })
			if !errors.Is(err, want) {
				t.Errorf("session %q: %v, want %v", session, err, want)
			}
			if b.Len() != 0 {
				t.Errorf("session %q: %d bytes written before the error", session, b.Len())
			}
		}
	}
}

// A failing writer's error comes back.
func TestJSON_WriterError(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, store.Options{NoSync: true})
	incidentDB(t, db, "mig", "extractive")
	boom := errors.New("disk full")
	for _, fn := range []func(io.Writer, *store.Snapshot, dump.Options) error{dump.JSON, dump.Text, dump.Dot} {
		err := db.View(func(s *store.Snapshot) error { return fn(failingWriter{boom}, s, dump.Options{Raw: true}) })
		if !errors.Is(err, boom) {
			t.Errorf("error %v, want %v", err, boom)
		}
	}
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }

func TestDot_Picture(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, store.Options{NoSync: true})
	incidentDB(t, db, "mig", "extractive")
	incidentDB(t, db, "lossy", "lossy")
	out := render(t, db, dump.Dot, dump.Options{})
	if again := render(t, db, dump.Dot, dump.Options{}); again != out {
		t.Fatalf("two renderings of one snapshot differ")
	}
	for _, want := range []string{
		"digraph strata {",
		`subgraph cluster_0 {`, `label="session lossy\n`, `subgraph cluster_1 {`, `label="session mig\n`,
		// The lossy session: everything raw, the refusals, the start checkpoint.
		`s0_l0_0 [shape=box, style=dashed, label="L0 seq 1..41\n41 events\nuncompacted tail"];`,
		`s0_r1 [shape=note, color=darkorange3, fontcolor=darkorange3, label="refused L1 seq 1..12\nlossy, attempt 0, checkpoint 1\nartifact:migrations/003_down.sql"];`,
		`s0_c1 -> s0_l0_0 [style=dashed, color=darkgreen, label="raw after 0"];`,
		// The extractive session, folded: an L2 root over two L1 nodes, whose
		// markers are invalid with the reason.
		`s1_n1 -> s1_n3;`, `s1_n2 -> s1_n3;`, `s1_l0_0 -> s1_n1;`,
		`s1_n3 [shape=box, style="rounded,filled", fillcolor=lightblue, penwidth=2, label="L2 node 3\nseq 1..23, root`,
		`s1_m1 [shape=note, color=red, fontcolor=red, label="marker 1: invalid\nboundary seq 12, frame version 0\nroot 1 folded into L2 node 3 at frame\nversion 1"];`,
		`s1_m3 [shape=note, color=darkgreen, fontcolor=darkgreen, label="marker 3: valid`,
		`label="checkpoint 2: invalid\nseq 12, prefix [1]\nnode 1 committed\ninvalid: roots 1,2 folded into L2 node 3 at`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the picture lacks %s\n%s", want, out)
		}
	}
	if strings.Count(out, "{") != strings.Count(out, "}") {
		t.Errorf("unbalanced braces")
	}
	one := render(t, db, dump.Dot, dump.Options{Session: "mig"})
	if strings.Contains(one, "lossy") || !strings.Contains(one, "session mig") {
		t.Errorf("--session mig draws another session:\n%s", one)
	}
	checkDot(t, out)
}

// Text from the database cannot break the graph: quotes, backslashes, line
// breaks and control characters in a session id and a reason.
func TestDot_HostileText(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, store.Options{NoSync: true})
	session := `a "quoted" \ session }; digraph x {`
	if _, err := db.Append(session,
		tier.Event{Kind: tier.KindUser, Text: "hi"},
		tier.Event{Kind: tier.KindRejected, Key: `k"ey\`, Text: "line one\nline \"two\"\\"},
	); err != nil {
		t.Fatal(err)
	}
	sum, _ := compaction.NewLossy(compaction.DropNegatives)
	comp, err := compaction.NewCompactor(db, compaction.Options{Summarizer: sum, Policy: compaction.Policy{EveryEvents: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := comp.Run(context.Background(), session); err != nil {
		t.Fatal(err)
	}
	out := render(t, db, dump.Dot, dump.Options{})
	if !strings.Contains(out, `label="session a \"quoted\" \\ session }; digraph x {\n`) {
		t.Errorf("session id not escaped:\n%s", out)
	}
	if !strings.Contains(out, `retention:k\"ey\\`) {
		t.Errorf("refusal reason not escaped:\n%s", out)
	}
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if strings.ContainsAny(line, "\r\x00\x01") {
			t.Errorf("line %d holds a control character: %q", i+1, line)
		}
	}
	checkDot(t, out)
}

func TestDot_Empty(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, store.Options{NoSync: true})
	out := render(t, db, dump.Dot, dump.Options{})
	if !strings.Contains(out, `empty [shape=plaintext, label="no sessions"];`) || !strings.HasSuffix(out, "}\n") {
		t.Errorf("empty database:\n%s", out)
	}
	checkDot(t, out)
}

// checkDot has Graphviz parse the picture when it is installed: an extra
// check; the tests above do not need it.
func checkDot(t *testing.T, src string) {
	t.Helper()
	path, err := exec.LookPath("dot")
	if err != nil {
		t.Log("graphviz's dot is not installed: the picture is not rendered")
		return
	}
	cmd := exec.Command(path, "-Tsvg")
	cmd.Stdin = strings.NewReader(src)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 || !bytes.Contains(out, []byte("<svg")) {
		t.Errorf("dot -Tsvg: %v\n%s", err, stderr.String())
	}
}

// TestDump_UncheckedSaysSo: a node and marker committed without validation
// say so in the text, JSON and dot renderings.
func TestDump_UncheckedSaysSo(t *testing.T) {
	t.Parallel()
	// Not dbtest.Open: its Verify at cleanup rightly refuses the database.
	db, err := store.Open(filepath.Join(t.TempDir(), "unchecked.db"), store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Append("s", tier.Event{Kind: tier.KindUser, Text: "hi"}, tier.Event{Kind: tier.KindRejected, Key: "a", Text: "no"}); err != nil {
		t.Fatal(err)
	}
	p, err := db.PlanSpan("s", 2, 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CommitUnchecked(p, store.Summary{Narrative: "nothing happened", Summarizer: "naive"}); err != nil {
		t.Fatal(err)
	}
	text := render(t, db, dump.Text, dump.Options{})
	if strings.Count(text, "UNCHECKED") < 2 {
		t.Errorf("text dump: the node and the marker should say UNCHECKED:\n%s", text)
	}
	js := render(t, db, dump.JSON, dump.Options{})
	if strings.Count(js, `"unchecked": true`) != 2 {
		t.Errorf("JSON dump: want the node and the marker unchecked:\n%s", js)
	}
	dot := render(t, db, dump.Dot, dump.Options{})
	if !strings.Contains(dot, "UNCHECKED: never validated") || !strings.Contains(dot, "UNCHECKED: promises nothing") {
		t.Errorf("dot dump does not mark the unchecked node and marker:\n%s", dot)
	}
}
