package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/pflag"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/transcript"
)

// eventsOf returns the number of events of each session of db.
func eventsOf(t testing.TB, db string) map[string]uint64 {
	t.Helper()
	d, err := store.Open(db, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	out := map[string]uint64{}
	err = d.View(func(s *store.Snapshot) error {
		ids, err := s.Sessions()
		for _, id := range ids {
			info, err := s.Info(id)
			if err != nil {
				return err
			}
			out[id] = info.Head
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// closing matches the closing line of an import --db.
var closing = regexp.MustCompile(`(?m)^imported files=(\d+) sessions=(\d+) events=(\d+) known=(\d+) compacted=(\d+) refused=(\d+)$`)

// closingOf returns the numbers of the closing line of out.
func closingOf(t testing.TB, out string) (files, sessions, events, known int) {
	t.Helper()
	m := closing.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no closing line in %q", out)
	}
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	return n(m[1]), n(m[2]), n(m[3]), n(m[4])
}

// Two Claude Code files of one name are the two sessions their records
// name; a file whose records name two sessions is two sessions.
func TestImport_SessionsOfTheRecords(t *testing.T) {
	a := fixture(t, "claude-code/sessions/python-to-rust-port/transcript.jsonl")
	b := fixture(t, "claude-code/sessions/coverage-test-fix/transcript.jsonl")
	two := fixture(t, "claude-code/two-sessions.jsonl")
	db := tempDB(t)
	out := mustCLI(t, "import", "--format", "claude-code", "--db", db, a, b, two)
	want := []string{"5b0e1c2d-0001-4a6f-9e43-port00000001", "9d4f7a3e-0002-4b1c-8f20-cov000000002",
		"aaaaaaaa-0003-4000-8000-first0000001", "bbbbbbbb-0004-4000-8000-second000002"}
	if got := sessionsOf(t, db); !slices.Equal(got, want) {
		t.Fatalf("sessions %q, want %q\n%s", got, want, out)
	}
	for _, w := range []string{"imported file=" + a + " session=" + want[0] + " events=", "imported file=" + two + " session=" + want[3] + " events=4 seq=1..4"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	// --session still puts everything in one.
	one := tempDB(t)
	mustCLI(t, "import", "--format", "claude-code", "--db", one, "--session", "all", a, b)
	if got := sessionsOf(t, one); !slices.Equal(got, []string{"all"}) {
		t.Errorf("--session: sessions %q", got)
	}
	dbtest.MustVerify(t, db)
}

// Files holding several conversations — a JSON list, JSONL of
// conversations, the keys exports and trajectories use — import each as a
// session of its own.
func TestImport_SeveralConversations(t *testing.T) {
	db := tempDB(t)
	mustCLI(t, "import", "--format", "openai", "--db", db, fixture(t, "openai/conversations.json"), fixture(t, "openai/trajectories.jsonl"))
	mustCLI(t, "import", "--format", "anthropic", "--db", db, fixture(t, "anthropic/claude-ai.json"))
	got := eventsOf(t, db)
	want := map[string]uint64{"conv-retry": 5, "conversations-2": 3, "42": 2, "sharegpt-7": 3, "trajectories-2": 3,
		"trajectories-3": 8, "turns-1": 2, "c1a2b3c4-0000-4000-8000-claudeai0001": 2}
	if len(got) != len(want) {
		t.Errorf("sessions %v, want %v", got, want)
	}
	for id, n := range want {
		if got[id] != n {
			t.Errorf("session %s: %d events, want %d", id, got[id], n)
		}
	}
	// To stdout: every event names its session.
	r := cli(t, "", "import", "--format", "openai", fixture(t, "openai/conversations.json"))
	wantCode(t, r, exitOK, "import to stdout")
	if n := strings.Count(r.stdout, `"session":"conversations-2"`); n != 3 {
		t.Errorf("%d events of conversations-2 on stdout, want 3:\n%s", n, r.stdout)
	}
	if n := strings.Count(r.stderr, "import: "); n != 3 {
		t.Errorf("stderr: %d lines, want one per session:\n%s", n, r.stderr)
	}
	dbtest.MustVerify(t, db)
}

// Importing a file again adds nothing, and says so; a file that grew adds
// its new records only, and the database ends as one import of the whole
// file makes it.
func TestImport_Again(t *testing.T) {
	full := readBytes(t, fixture(t, "claude-code/session.jsonl"))
	lines := bytes.SplitAfter(full, []byte("\n"))
	grown := filepath.Join(t.TempDir(), "session.jsonl")
	if err := os.WriteFile(grown, bytes.Join(lines[:14], nil), 0o600); err != nil {
		t.Fatal(err)
	}
	db := tempDB(t)
	flags := []string{"import", "--format", "claude-code", "--db", db, "--every-events", "6", grown}
	_, _, first, _ := closingOf(t, mustCLI(t, flags...))
	if err := os.WriteFile(grown, full, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, second, _ := closingOf(t, mustCLI(t, flags...))
	out := mustCLI(t, flags...)
	if _, _, events, known := closingOf(t, out); events != 0 || known == 0 || !strings.Contains(out, " events=0 known=") {
		t.Errorf("a third import: %q, want events=0 and the records known", out)
	}
	once := filepath.Join(t.TempDir(), "once.db")
	_, _, all, _ := closingOf(t, mustCLI(t, "import", "--format", "claude-code", "--db", once, "--every-events", "6", grown))
	if first == 0 || second == 0 || first+second != all {
		t.Errorf("events imported: %d, then %d as the file grew; one import of it: %d", first, second, all)
	}
	if a, b := mustCLI(t, "dump", "--json", "--raw", once), mustCLI(t, "dump", "--json", "--raw", db); a != b {
		t.Errorf("the database of a file imported as it grew differs from one import of it")
	}
	dbtest.MustVerify(t, db)
}

// Imports of the same file into one database at once store each record
// once: goroutines of one process sharing the database, and commands
// waiting for each other's lock.
func TestImport_Concurrent(t *testing.T) {
	file := fixture(t, "claude-code/two-sessions.jsonl")
	once := tempDB(t)
	mustCLI(t, "import", "--format", "claude-code", "--db", once, file)
	want := eventsOf(t, once)

	// In one process, through one DB.
	path := tempDB(t)
	db, err := store.Open(path, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	o := &importOptions{format: "claude-code", db: path, timeout: time.Second}
	o.policyFlags.add(pflag.NewFlagSet("import", pflag.ContinueOnError)) // the flags' defaults
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	const importers = 4
	var wg sync.WaitGroup
	for range importers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			imp, err := newImporter(db, o, io.Discard, nil)
			if err == nil {
				err = imp.file(context.Background(), file, nil)
			}
			if err != nil {
				t.Errorf("import: %v", err)
			}
		}()
	}
	wg.Wait()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if got := eventsOf(t, path); !mapsEqual(got, want) {
		t.Errorf("concurrent importers in one process: %v, want %v", got, want)
	}
	dbtest.MustVerify(t, path)

	// Commands, each opening the file: they wait for each other's lock.
	path = tempDB(t)
	results := make([]result, importers)
	for i := range importers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = cli(t, "", "import", "--format", "claude-code", "--db", path, "--timeout", "60s", file)
		}()
	}
	wg.Wait()
	events := 0
	for _, r := range results {
		wantCode(t, r, exitOK, "import")
		_, _, n, _ := closingOf(t, r.stdout)
		events += n
	}
	if got := eventsOf(t, path); !mapsEqual(got, want) || events != 8 {
		t.Errorf("concurrent commands: %v (%d events imported), want %v", got, events, want)
	}
	dbtest.MustVerify(t, path)
}

func mapsEqual(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A file in which nothing is recognized is an error naming the file and
// what it holds; a database the command made for it is removed, one that
// was there is kept.
func TestImport_NothingRecognized(t *testing.T) {
	file := writeFile(t, "traj.json", `{"info":{"model":"x"},"steps_taken":3,"result":[1,2]}`)
	db := tempDB(t)
	r := cli(t, "", "import", "--format", "openai", "--db", db, file)
	wantCode(t, r, exitError, "import")
	for _, w := range []string{"Error: " + file + `: a JSON object with keys "info", "result", "steps_taken": no list of messages under messages, input,`,
		"Hint: is --format openai right?"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr %q lacks %q", r.stderr, w)
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("the database made for nothing is left: %v", err)
	}
	if r := cli(t, "", "import", "--format", "openai", file); r.code != exitError || r.stdout != "" {
		t.Errorf("to stdout: exit %d, stdout %q", r.code, r.stdout)
	}
	// A database that was there stays, with what it held — an empty one
	// too.
	mustCLI(t, "import", "--format", "openai", "--db", db, fixture(t, "openai/chat.json"))
	wantCode(t, cli(t, "", "import", "--format", "openai", "--db", db, file), exitError, "import into a database")
	if got := sessionsOf(t, db); !slices.Equal(got, []string{"chat"}) {
		t.Errorf("sessions %q after a failed import, want chat", got)
	}
	empty := tempDB(t)
	d, err := store.Open(empty, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	wantCode(t, cli(t, "", "import", "--format", "openai", "--db", empty, file), exitError, "import into an empty database")
	if _, err := os.Stat(empty); err != nil {
		t.Errorf("an empty database that was there is gone: %v", err)
	}
}

// A missing file, or bad input, leaves no new database behind, for import
// and for replay; what a failed command stored before it stays.
func TestImportReplay_FailureLeavesNoNewDatabase(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.jsonl")
	bad := writeFile(t, "bad.jsonl", `{"session":"s","kind":"user","text":"a"}`+"\n"+`{"kind":`+"\n")
	for _, args := range [][]string{
		{"replay", "--db", "DB", missing},
		{"replay", "--db", "DB", "--session", "s", "-"},
		{"replay", "--db", "DB", writeFile(t, "worse.jsonl", `{"kind":"nope"}`+"\n")},
		{"import", "--format", "openai", "--db", "DB", missing},
		{"import", "--format", "openai", "--db", "DB", writeFile(t, "broken.json", `[{"role":"user",`)},
	} {
		db := filepath.Join(t.TempDir(), "new.db")
		args = slices.Clone(args)
		args[slices.Index(args, "DB")] = db
		r := cli(t, `{"kind":"tool_result","id":"never-opened"}`+"\n", args...)
		wantCode(t, r, exitError, args...)
		if _, err := os.Stat(db); !os.IsNotExist(err) {
			t.Errorf("strata %s: left a database: %v", strings.Join(args, " "), err)
		}
		if entries, _ := os.ReadDir(filepath.Dir(db)); len(entries) != 0 {
			t.Errorf("strata %s: left %v", strings.Join(args, " "), entries)
		}
	}
	// Replay stores the lines before the bad one: that database stays.
	db := tempDB(t)
	wantCode(t, cli(t, "", "replay", "--db", db, bad), exitError, "replay bad")
	if got := sessionsOf(t, db); !slices.Equal(got, []string{"s"}) {
		t.Errorf("sessions %q, want s with the line before the bad one", got)
	}
}

// The real Claude Code transcripts (../shared/data/claude-code, every
// *.jsonl under it): one session per conversation the records name — per
// sessionId, a sub-agent's file apart — counted here from the files; a
// second import adds nothing; a file that grew adds only its new records;
// concurrent imports store each record once.
func TestImport_RealClaudeCode(t *testing.T) {
	root := filepath.Join("..", "..", "..", "shared", "data", "claude-code")
	var files []string
	_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.HasSuffix(p, ".jsonl") {
			files = append(files, p)
		}
		return nil
	})
	if len(files) == 0 {
		t.Skip("../shared/data/claude-code holds no transcripts here")
	}
	sort.Strings(files)
	want := map[string]bool{}
	sawEvents := false
	for _, f := range files {
		for id := range conversationsOf(t, f) {
			want[id] = true
		}
		sawEvents = true
	}
	db := tempDB(t)
	out := mustCLI(t, append([]string{"import", "--format", "claude-code", "--db", db}, files...)...)
	got := sessionsOf(t, db)
	if len(got) != len(want) {
		t.Errorf("%d sessions from %d files, want one per conversation the records name (%d): %q", len(got), len(files), len(want), got)
	}
	for _, id := range got {
		if !want[id] {
			t.Errorf("session %q names no conversation of the files", id)
		}
	}
	nFiles, _, events, _ := closingOf(t, out)
	if nFiles != len(files) || sawEvents && events == 0 {
		t.Errorf("closing line: %q", out[strings.LastIndex(strings.TrimSuffix(out, "\n"), "\n")+1:])
	}
	if _, _, again, known := closingOf(t, mustCLI(t, append([]string{"import", "--format", "claude-code", "--db", db}, files...)...)); again != 0 || known == 0 {
		t.Errorf("a second import of everything: %d events, %d known; want 0 and every record known", again, known)
	}
	if got := mustCLI(t, "verify", db); got != "ok\n" {
		t.Errorf("verify: %s", got)
	}

	// The largest file, grown: only its new records are added.
	big := files[0]
	for _, f := range files {
		if len(readBytes(t, f)) > len(readBytes(t, big)) {
			big = f
		}
	}
	full := readBytes(t, big)
	lines := bytes.SplitAfter(full, []byte("\n"))
	grown := filepath.Join(t.TempDir(), filepath.Base(big))
	if err := os.WriteFile(grown, bytes.Join(lines[:len(lines)/2], nil), 0o600); err != nil {
		t.Fatal(err)
	}
	gdb := tempDB(t)
	_, _, first, _ := closingOf(t, mustCLI(t, "import", "--format", "claude-code", "--db", gdb, grown))
	if err := os.WriteFile(grown, full, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, second, _ := closingOf(t, mustCLI(t, "import", "--format", "claude-code", "--db", gdb, grown))
	whole := tempDB(t)
	_, _, all, _ := closingOf(t, mustCLI(t, "import", "--format", "claude-code", "--db", whole, big))
	if first == 0 || second == 0 || first+second != all {
		t.Errorf("%s: %d events, then %d as it grew; one import: %d", filepath.Base(big), first, second, all)
	}
	if !mapsEqual(eventsOf(t, gdb), eventsOf(t, whole)) {
		t.Errorf("grown: %v, whole: %v", eventsOf(t, gdb), eventsOf(t, whole))
	}

	// Concurrent commands importing it into one database.
	cdb := tempDB(t)
	var wg sync.WaitGroup
	results := make([]result, 3)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = cli(t, "", "import", "--format", "claude-code", "--db", cdb, "--timeout", "120s", big)
		}()
	}
	wg.Wait()
	for _, r := range results {
		wantCode(t, r, exitOK, "concurrent import")
	}
	if !mapsEqual(eventsOf(t, cdb), eventsOf(t, whole)) {
		t.Errorf("concurrent: %v, want %v", eventsOf(t, cdb), eventsOf(t, whole))
	}
	dbtest.MustVerify(t, cdb)
}

// conversationsOf reads a Claude Code file line by line and returns the
// conversations its records name: each record's sessionId, and for a
// sub-agent's file (its first user or assistant record is a sidechain)
// "<sessionId>/agent-<agentId>" for its sidechain records.
func conversationsOf(t testing.TB, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	started, subagent := false, false
	for sc.Scan() {
		var rec struct {
			Type        string `json:"type"`
			SessionID   string `json:"sessionId"`
			AgentID     string `json:"agentId"`
			IsSidechain bool   `json:"isSidechain"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		if !started && (rec.Type == "user" || rec.Type == "assistant") {
			started, subagent = true, rec.IsSidechain
		}
		switch {
		case rec.SessionID == "":
		case subagent && rec.IsSidechain && rec.AgentID != "":
			out[rec.SessionID+"/agent-"+rec.AgentID] = true
		default:
			out[rec.SessionID] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// An importer whose decode went stale — another stored the same records
// between its decode and its append — is refused by the store, and decodes
// again rather than fail: the records are stored once.
func TestImport_StaleDecodeIsDoneAgain(t *testing.T) {
	file := fixture(t, "claude-code/two-sessions.jsonl")
	path := tempDB(t)
	db, err := store.Open(path, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	o := &importOptions{format: "claude-code", db: path, timeout: time.Second}
	o.policyFlags.add(pflag.NewFlagSet("import", pflag.ContinueOnError))
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	stale, err := newImporter(db, o, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	heads := map[string]uint64{}
	var ss []transcript.Session
	err = db.View(func(s *store.Snapshot) error {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		ss, err = o.read(f, file, func(conv string) (transcript.Target, error) { return stale.target(s, conv, file, heads) })
		return err
	})
	if err != nil || len(ss) != 2 {
		t.Fatalf("decode: %d sessions, %v", len(ss), err)
	}
	other, _ := newImporter(db, o, io.Discard, nil)
	if err := other.file(context.Background(), file, nil); err != nil {
		t.Fatal(err)
	}
	b := &batch{events: ss[0].Events, lines: ss[0].Lines}
	again, err := stale.flush(context.Background(), ss[0].ID, file, b, heads, true)
	if err != nil || !again {
		t.Fatalf("a stale decode: again %v, %v; want to decode again", again, err)
	}
	_, err = stale.flush(context.Background(), ss[0].ID, file, b, heads, false)
	if !errors.Is(err, store.ErrRefStored) || !strings.Contains(err.Error(), file+":2: ") {
		t.Fatalf("a stale decode with no try left: %v, want the store's refusal on the record's line", err)
	}
	if err := stale.file(context.Background(), file, nil); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if got := eventsOf(t, path); got["aaaaaaaa-0003-4000-8000-first0000001"] != 4 || got["bbbbbbbb-0004-4000-8000-second000002"] != 4 {
		t.Errorf("events %v, want each record once", got)
	}
}
