package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/strata-go/strata/debughttp"
	"github.com/strata-go/strata/store"
)

// dumpDoc is the JSON dump, decoded loosely: each session's members are
// kept raw so that the test can check they are arrays and objects.
type dumpDoc struct {
	FormatVersion *int                         `json:"format_version"`
	Sessions      []map[string]json.RawMessage `json:"sessions"`
}

func decodeDump(t *testing.T, out string) dumpDoc {
	t.Helper()
	var d dumpDoc
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("dump --json is not one JSON document: %v\n%s", err, out)
	}
	if dec.More() {
		t.Fatalf("dump --json holds more than one JSON value")
	}
	if d.FormatVersion == nil || d.Sessions == nil {
		t.Fatalf("dump --json lacks format_version or sessions:\n%s", out)
	}
	return d
}

// storedFormat returns the format version the store reports for the
// database at path.
func storedFormat(t *testing.T, path string) int {
	t.Helper()
	db, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	if err := db.View(func(s *store.Snapshot) (err error) { v, err = s.FormatVersion(); return err }); err != nil {
		t.Fatal(err)
	}
	return v
}

// eventsJSONL returns the events of a `dump --json --raw` as JSONL.
func eventsJSONL(t *testing.T, out string) string {
	t.Helper()
	var b bytes.Buffer
	for _, s := range decodeDump(t, out).Sessions {
		var evs []json.RawMessage
		if err := json.Unmarshal(s["events"], &evs); err != nil {
			t.Fatalf("events: %v", err)
		}
		for _, e := range evs {
			if err := json.Compact(&b, e); err != nil {
				t.Fatal(err)
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func TestDump_JSON(t *testing.T) {
	t.Parallel()
	// Spans by event count fall mid-turn: a lossy summarizer that drops open
	// calls is refused there, and committed elsewhere; folds invalidate.
	db := replayed(t, []string{"--every", "0", "--every-events", "5", "--fold", "2", "--summarizer", "lossy", "--drop", "open"}, incident(t))
	out := mustCLI(t, "dump", "--json", "--raw", db)
	d := decodeDump(t, out)
	if want := storedFormat(t, db); *d.FormatVersion != want || len(d.Sessions) != 1 {
		t.Fatalf("format_version %d (the store reports %d), %d sessions", *d.FormatVersion, want, len(d.Sessions))
	}
	s := d.Sessions[0]
	for _, k := range []string{"roots", "nodes", "markers", "checkpoints", "audit", "events"} {
		if v := string(s[k]); !strings.HasPrefix(v, "[") {
			t.Errorf("%s is %.40q, want an array", k, v)
		}
	}
	for _, k := range []string{"frame", "ledger"} {
		if v := string(s[k]); !strings.HasPrefix(v, "{") {
			t.Errorf("%s is %.40q, want an object", k, v)
		}
	}
	if string(s["id"]) != `"mig"` || string(s["head_seq"]) != "41" {
		t.Errorf("id %s head_seq %s", s["id"], s["head_seq"])
	}
	var frame map[string]any
	_ = json.Unmarshal(s["frame"], &frame)
	for _, k := range []string{"version", "depth", "compacted_to"} {
		if _, ok := frame[k]; !ok {
			t.Errorf("frame lacks %s: %s", k, s["frame"])
		}
	}
	var markers []map[string]any
	_ = json.Unmarshal(s["markers"], &markers)
	statuses := map[any]bool{}
	for _, m := range markers {
		for _, k := range []string{"id", "node", "depth", "frame_version", "boundary", "status", "reason"} {
			if _, ok := m[k]; !ok {
				t.Errorf("marker lacks %s: %v", k, m)
			}
		}
		statuses[m["status"]] = true
	}
	if !statuses["valid"] || !statuses["invalid"] {
		t.Errorf("marker statuses %v, want valid and invalid", statuses)
	}
	var nodes []map[string]any
	_ = json.Unmarshal(s["nodes"], &nodes)
	for _, n := range nodes {
		for _, k := range []string{"id", "depth", "from", "to", "children", "superseded", "parent", "claims", "narrative"} {
			if _, ok := n[k]; !ok {
				t.Errorf("node lacks %s: %v", k, n)
			}
		}
	}
	var ckpts []map[string]any
	_ = json.Unmarshal(s["checkpoints"], &ckpts)
	for _, c := range ckpts {
		for _, k := range []string{"id", "seq", "status", "reason"} {
			if _, ok := c[k]; !ok {
				t.Errorf("checkpoint lacks %s: %v", k, c)
			}
		}
	}
	var ledger map[string]json.RawMessage
	_ = json.Unmarshal(s["ledger"], &ledger)
	for _, k := range []string{"open", "dispositions", "constraints", "artifacts"} {
		if !strings.HasPrefix(string(ledger[k]), "[") {
			t.Errorf("ledger %s is %s", k, ledger[k])
		}
	}
	if !strings.Contains(string(s["audit"]), `"reasons": "closure:c3"`) {
		t.Errorf("audit lacks the refusal: %s", s["audit"])
	}
	if regexp.MustCompile(`: null\b`).MatchString(out) {
		t.Errorf("dump --json holds a null")
	}

	// Without --raw: no events; an empty database: no sessions.
	d = decodeDump(t, mustCLI(t, "dump", "--json", db))
	if _, ok := d.Sessions[0]["events"]; ok {
		t.Errorf("events without --raw")
	}
	empty := replayed(t, nil, writeFile(t, "empty.jsonl", ""))
	if out := mustCLI(t, "dump", "--json", "--raw", empty); len(decodeDump(t, out).Sessions) != 0 {
		t.Errorf("sessions in an empty database:\n%s", out)
	}
}

func TestDump_Text(t *testing.T) {
	t.Parallel()
	db := replayed(t, []string{"--every", "2", "--fold", "2"}, incident(t))
	out := mustCLI(t, "dump", db)
	// An L2 root with its L1 children indented below it.
	if !regexp.MustCompile(`(?m)^    L2 node 3: seq=1\.\.\d+ root children=\[1,2\].*\n(      \| .*\n)*        L1 node 1: .*parent=3`).MatchString(out) {
		t.Errorf("no L2 root with its L1 children below it:\n%s", out)
	}
	for _, re := range []string{
		`(?m)^  frame: version=1 depth=2 compacted_to=\d+ roots=2$`,
		`(?m)^    marker 1: node=1 depth=1 frame_version=0 boundary=\d+ status=invalid reason="root 1 folded into L2 node 3`,
		`(?m)^    marker 3: .* status=valid$`,
		`(?m)^    checkpoint 1: seq=0 status=valid `,
		`(?m)^    checkpoint \d+: seq=\d+ status=invalid .* reason=`,
		`(?m)^    rejected approach/add-column-then-backfill seq=20 `,
		`(?m)^    open tool_call c10 name=bash seq=41$`,
		`(?m)^  audit:$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("dump lacks %s:\n%s", re, out)
		}
	}
	if strings.Contains(out, `{"seq"`) {
		t.Errorf("events without --raw")
	}

	lossy := replayed(t, []string{"--every", "2", "--summarizer", "lossy"}, incident(t))
	out = mustCLI(t, "dump", "--raw", lossy)
	if !regexp.MustCompile(`(?m)^    refusal 1: depth=1 seq=1\.\.12 checkpoint=1 summarizer=lossy attempt=0 reasons=artifact:migrations/003_down.sql\n      artifact:migrations/003_down.sql: not claimed$`).MatchString(out) {
		t.Errorf("no refusal in the audit:\n%s", out)
	}
	// The events are JSONL lines that replay accepts.
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "{") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 41 {
		t.Fatalf("%d event lines, want 41", len(lines))
	}
	again := replayed(t, []string{"--every", "2", "--summarizer", "lossy"}, writeFile(t, "events.jsonl", strings.Join(lines, "\n")+"\n"))
	if got := mustCLI(t, "dump", "--raw", again); got != out {
		t.Errorf("replaying the text dump's events gives another dump:\n%s", firstDiff(got, out))
	}
}

// Replaying the events of a dump into a new database with the same flags
// gives the same dump.
func TestDump_RoundTrip(t *testing.T) {
	t.Parallel()
	multi := writeFile(t, "multi.jsonl", `{"session":"b","kind":"user","text":"first"}
{"session":"a","kind":"user","text":"one","time":"2024-01-02T03:04:05.123456789+02:00"}
{"session":"b","kind":"open","id":"h1","name":"file","text":"notes.txt"}
{"session":"a","kind":"constraint","key":"tone","text":"be brief"}
{"session":"b","kind":"artifact","key":"out/a.txt","text":"<html> & \"quotes\" \u00e9\n second line"}
{"session":"a","kind":"user","text":"two"}
{"session":"b","kind":"user","text":"second"}
{"session":"a","kind":"withdrawn","key":"tone"}
{"session":"b","kind":"close","id":"h1","ok":false}
{"session":"a","kind":"user","text":"three"}
{"session":"b","kind":"superseded","key":"x@1","by":"x@2","text":"newer"}
{"session":"b","kind":"user","text":"third","turn":9}
`)
	for _, tc := range []struct {
		name  string
		flags []string
		files []string
	}{
		{"incident lossy", []string{"--every", "2", "--summarizer", "lossy"}, []string{incident(t)}},
		{"incident extractive", []string{"--every", "2", "--fold", "2"}, []string{incident(t)}},
		{"incident by events", []string{"--every", "0", "--every-events", "5", "--fold", "2", "--summarizer", "lossy", "--drop", "open,constraints"}, []string{incident(t)}},
		{"two sessions", []string{"--every", "1", "--fold", "2"}, []string{multi, incident(t)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := replayed(t, tc.flags, tc.files...)
			first := mustCLI(t, "dump", "--json", "--raw", db)
			again := replayed(t, tc.flags, writeFile(t, "events.jsonl", eventsJSONL(t, first)))
			if second := mustCLI(t, "dump", "--json", "--raw", again); second != first {
				t.Errorf("round trip changed the dump:\n%s", firstDiff(second, first))
			}
			if a, b := mustCLI(t, "dump", "--raw", db), mustCLI(t, "dump", "--raw", again); a != b {
				t.Errorf("round trip changed the text dump:\n%s", firstDiff(b, a))
			}
		})
	}
}

func TestDump_Session(t *testing.T) {
	t.Parallel()
	db := replayed(t, []string{"--session", "other"}, incident(t), writeFile(t, "x.jsonl", `{"kind":"user","text":"hi"}`+"\n"))
	d := decodeDump(t, mustCLI(t, "dump", "--json", db, "--session", "other"))
	if len(d.Sessions) != 1 || string(d.Sessions[0]["id"]) != `"other"` {
		t.Errorf("dump --session other: %d sessions", len(d.Sessions))
	}
	if d := decodeDump(t, mustCLI(t, "dump", "--json", db)); len(d.Sessions) != 2 {
		t.Errorf("dump: %d sessions, want 2", len(d.Sessions))
	}
	r := cli(t, "", "dump", "--session", "absent", db)
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "session not found") {
		t.Errorf("stderr %q", r.stderr)
	}
}

func TestDump_Usage(t *testing.T) {
	t.Parallel()
	db := replayed(t, nil, incident(t))
	for _, args := range [][]string{
		{"dump"},
		{"dump", db, db},
		{"dump", "--jsn", db},
		{"dump", "--timeout", "soon", db},
	} {
		wantCode(t, cli(t, "", args...), exitUsage, args...)
	}
	r := cli(t, "", "dump", db+".absent")
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "does not exist") {
		t.Errorf("stderr %q", r.stderr)
	}
}

// A database another process holds for writing: every command gives up
// after --timeout and says so plainly, and names the process that holds
// the file (on Linux). A command that takes a debug handler's URL is
// pointed at it (backup with its own hint, not the store's "read a
// backup"); a writing one is told that --timeout waits longer.
func TestDump_Locked(t *testing.T) {
	t.Parallel()
	db := replayed(t, nil, incident(t))
	pid := holdForWriting(t, db)
	holder := fmt.Sprintf("Hint: held by process %d (", pid)
	for _, cmd := range [][]string{
		{"dump", "--timeout", "300ms", db},
		{"stats", db, "--timeout", "300ms"},
		{"sessions", db, "--timeout", "300ms"},
		{"resume", "--db", db, "--session", "mig", "--timeout", "300ms"},
		{"resume", db, "--session", "mig", "--timeout", "300ms"},
		{"backup", "--timeout", "300ms", db, "-"},
		{"verify", "--timeout", "300ms", db},
		{"serve", "--timeout", "300ms", "--addr", "127.0.0.1:0", db},
		{"copy", "--timeout", "300ms", db, filepath.Join(t.TempDir(), "copy.db")},
		{"replay", "--db", db, "--timeout", "300ms", incident(t)},
		{"replay", db, "--timeout", "300ms", incident(t)},
		{"import", "--format", "openai", "--db", db, "--timeout", "300ms", writeFile(t, "t.json", `[{"role":"user","content":"hi"}]`)},
	} {
		start := time.Now()
		r := cli(t, "", cmd...)
		took := time.Since(start)
		wantCode(t, r, exitError, cmd...)
		if !strings.Contains(r.stderr, "another process") {
			t.Errorf("%s: stderr %q does not say another process holds the database", cmd[0], r.stderr)
		}
		writes := cmd[0] == "replay" || cmd[0] == "import" || cmd[0] == "copy"
		takesURL := !writes && cmd[0] != "serve"
		if got := strings.Contains(r.stderr, "/debug/strata"); got != takesURL {
			t.Errorf("%s: the debug handler's URL offered: %t, want %t:\n%s", cmd[0], got, takesURL, r.stderr)
		}
		if cmd[0] == "backup" && (strings.Contains(r.stderr, "read a backup") ||
			!strings.Contains(r.stderr, "strata backup http://127.0.0.1:6060/debug/strata DEST") ||
			!strings.Contains(r.stderr, "--timeout")) {
			t.Errorf("backup: the hint does not say back up through the URL or wait with --timeout:\n%s", r.stderr)
		}
		if got := strings.Contains(r.stderr, "Hint: --timeout waits longer"); got != writes {
			t.Errorf("%s: --timeout hint %t, want %t:\n%s", cmd[0], got, writes, r.stderr)
		}
		if runtime.GOOS == "linux" && !strings.Contains(r.stderr, holder) {
			t.Errorf("%s: stderr does not name the holder (%q):\n%s", cmd[0], holder, r.stderr)
		}
		if took > 300*time.Millisecond+time.Second {
			t.Errorf("%s: gave up after %s", cmd[0], took)
		}
	}
	start := time.Now()
	r := cli(t, "", "dump", db) // the default timeout, 1s
	wantCode(t, r, exitError)
	if took := time.Since(start); took < 800*time.Millisecond || took > 2*time.Second {
		t.Errorf("dump with the default --timeout gave up after %s", took)
	}
}

// --from/--to dump the nodes overlapping the range and the events in it;
// without --session, with --dot or backwards, they are bad usage.
func TestDump_Range(t *testing.T) {
	t.Parallel()
	db := replayed(t, []string{"--every", "2", "--fold", "2"}, incident(t))
	var doc struct {
		Sessions []struct {
			ID      string                          `json:"id"`
			HeadSeq uint64                          `json:"head_seq"`
			From    uint64                          `json:"from"`
			To      uint64                          `json:"to"`
			Nodes   []struct{ ID, From, To uint64 } `json:"nodes"`
			Events  []struct{ Seq uint64 }          `json:"events"`
			Markers json.RawMessage                 `json:"markers"`
		} `json:"sessions"`
	}
	js := mustCLI(t, "dump", "--json", "--session", "mig", "--from", "14", "--to", "20", db)
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	if len(doc.Sessions) != 1 {
		t.Fatalf("dump range:\n%s", js)
	}
	s := doc.Sessions[0]
	if s.ID != "mig" || s.HeadSeq != 41 || s.From != 14 || s.To != 20 || s.Markers != nil {
		t.Errorf("range session: %+v", s)
	}
	if len(s.Events) != 7 || s.Events[0].Seq != 14 || s.Events[6].Seq != 20 {
		t.Errorf("events %+v, want seqs 14..20", s.Events)
	}
	// Every node of the full dump that overlaps 14..20 is there, and no other.
	full := decodeDump(t, mustCLI(t, "dump", "--json", db))
	var nodes []struct{ ID, From, To uint64 }
	if err := json.Unmarshal(full.Sessions[0]["nodes"], &nodes); err != nil {
		t.Fatal(err)
	}
	var want []uint64
	for _, n := range nodes {
		if n.From <= 20 && n.To >= 14 {
			want = append(want, n.ID)
		}
	}
	var got []uint64
	for _, n := range s.Nodes {
		got = append(got, n.ID)
	}
	if len(want) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("nodes %v, want %v", got, want)
	}

	text := mustCLI(t, "dump", "--session", "mig", "--from", "40", db)
	if !strings.Contains(text, "\nsession mig: head_seq=41 turn=8 seq=40..41\n") || !strings.Contains(text, "\n  events: 2\n{\"seq\":40,") ||
		strings.Contains(text, "markers:") {
		t.Errorf("dump --from 40:\n%s", text)
	}
	if out := mustCLI(t, "dump", "--json", "--session", "mig", "--to", "3", db); !strings.Contains(out, `"from": 1,`) || !strings.Contains(out, `"to": 3,`) {
		t.Errorf("dump --to 3:\n%s", out)
	}
	for _, args := range [][]string{
		{"dump", "--from", "3", db},
		{"dump", "--to", "3", db},
		{"dump", "--session", "mig", "--from", "5", "--to", "4", db},
		{"dump", "--session", "mig", "--from", "1", "--dot", db},
		{"dump", "--session", "mig", "--from", "x", db},
	} {
		wantCode(t, cli(t, "", args...), exitUsage, args...)
	}
	// A range that starts past the head is an error, before any output.
	for _, args := range [][]string{{"dump", "--session", "mig", "--from", "70", db}, {"dump", "--json", "--session", "mig", "--to", "80", "--from", "42", db}} {
		r := cli(t, "", args...)
		wantCode(t, r, exitError, args...)
		r.stderr = asText(t, r.stderr)
		if r.stdout != "" || !strings.HasPrefix(r.stderr, "Error: dump: seq range starts past the session's head: seq "+args[len(args)-2]+"..") ||
			!strings.Contains(r.stderr, `of session "mig", whose head is seq 41`) {
			t.Errorf("%v: stdout %q, stderr %q", args, r.stdout, r.stderr)
		}
	}
	forms := [][]string{{"dump", "--json", "--session", "mig", "--from", "14", "--to", "20"}, {"dump", "--session", "mig", "--to", "20"}}
	var local []string
	for _, f := range forms {
		local = append(local, mustCLI(t, append(f, db)...))
	}
	url := liveAgent(t, db, debughttp.Options{})
	if r := cli(t, "", "dump", "--session", "mig", "--from", "70", url); r.code != exitError || !strings.Contains(r.stderr, "past the session's head") {
		t.Errorf("--from 70 through the URL: exit %d, stderr %q", r.code, r.stderr)
	}
	for i, f := range forms {
		if got := mustCLI(t, append(f, url)...); got != local[i] {
			t.Errorf("%v through the URL:\n%s", f, firstDiff(got, local[i]))
		}
	}
}
