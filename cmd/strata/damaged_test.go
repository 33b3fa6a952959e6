package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/debughttp"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/internal/errmark"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// damagedNarrative is the narrative of session b-damaged's one node: bytes
// found nowhere else in the file (save copies of its page that bbolt freed),
// so that flipping one of them damages that record alone.
const damagedNarrative = "b-damaged: the narrative of its only node, zq7-unique"

// damagedDB returns a database of two sessions: a-intact, the incident
// replayed with the extractive summarizer, and b-damaged, a few events under
// one node (the root of its latest marker, which every reading command
// reads) and a tail. The file verifies. damage flips a byte of the node's
// narrative.
func damagedDB(t *testing.T) (path string, damage func()) {
	t.Helper()
	path = tempDB(t)
	db, err := store.Open(path, store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	dbtest.ReplayIncident(t, db, "a-intact", compaction.Extractive{})
	const b = "b-damaged"
	if _, err := db.Append(b,
		tier.Event{Kind: tier.KindUser, Text: "List the migrations."},
		tier.Event{Kind: tier.KindToolCall, ID: "c1", Name: "bash", Text: "ls migrations/"},
		tier.Event{Kind: tier.KindToolResult, ID: "c1", Text: "001_init.sql"},
		tier.Event{Kind: tier.KindAssistant, Text: "One migration so far."},
	); err != nil {
		t.Fatal(err)
	}
	p, err := db.PlanSpan(b, 4, compaction.DefaultBudget)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(p, store.Summary{Narrative: damagedNarrative, Claims: p.Required.Claims(), Summarizer: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Append(b, tier.Event{Kind: tier.KindUser, Text: "Go on."}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path, func() {
		raw := readBytes(t, path)
		n := bytes.Count(raw, []byte(damagedNarrative))
		if n == 0 {
			t.Fatal("the node's narrative is not in the file")
		}
		// Every copy: the live record, and any freed page holding an old
		// one (harmless to damage).
		for i := 0; ; {
			j := bytes.Index(raw[i:], []byte(damagedNarrative))
			if j < 0 {
				break
			}
			raw[i+j+len("b-damaged: the ")] ^= 0x01
			i += j + len(damagedNarrative)
		}
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// Every reading command exits 1 when a record it reads is damaged — also
// after printing what came before it — with the error naming the session
// and a hint to run verify; verify finds the damage (exit 3). A session the
// damage is not in still reads.
func TestDamaged_ReadingCommandsFail(t *testing.T) {
	t.Parallel()
	db, damage := damagedDB(t)
	wantCode(t, cli(t, "", "verify", db), exitOK, "verify (before the damage)")
	before := mustCLI(t, "dump", db)
	damage()

	hint := "Hint: the database is damaged; to list every problem it holds, run: strata verify " + shellQuote(db) + "\n"
	for _, tc := range []struct {
		args    []string
		partial string // what stdout begins with: the part read before the damage
	}{
		{[]string{"dump", db}, strings.TrimSuffix(before[:strings.Index(before, "session b-damaged")], "\n")},
		{[]string{"dump", "--json", db}, "{\n  \"format_version\""},
		{[]string{"dump", "--dot", db}, "// strata dump --dot"},
		{[]string{"dump", "--session", "b-damaged", db}, "strata database:"},
		{[]string{"resume", "--db", db, "--session", "b-damaged"}, ""},
		{[]string{"resume", "--db", db, "--session", "b-damaged", "--json"}, ""},
		{[]string{"stats", db}, ""},
		{[]string{"stats", "--json", db}, ""},
		{[]string{"stats", "--session", "b-damaged", db}, ""},
		{[]string{"sessions", db}, ""},
		{[]string{"sessions", "--json", db}, ""},
		{[]string{"resume", db, "--session", "b-damaged"}, ""},
		{[]string{"dump", "--session", "b-damaged", "--from", "1", "--to", "4", db}, "strata database:"},
	} {
		r := cli(t, "", tc.args...)
		wantCode(t, r, exitError, tc.args...)
		r.stderr = asText(t, r.stderr) // --json: the same error as a JSON line
		if !strings.HasPrefix(r.stderr, "Error: store: database is damaged: ") || !strings.Contains(r.stderr, `session "b-damaged"`) {
			t.Errorf("strata %s: stderr does not say the damage and its session:\n%s", strings.Join(tc.args, " "), r.stderr)
		}
		if !strings.HasSuffix(r.stderr, hint) {
			t.Errorf("strata %s: stderr does not end with %q:\n%s", strings.Join(tc.args, " "), hint, r.stderr)
		}
		if !strings.HasPrefix(r.stdout, tc.partial) || (tc.partial == "") != (r.stdout == "") {
			t.Errorf("strata %s: stdout %.200q, want it to begin with %.200q", strings.Join(tc.args, " "), r.stdout, tc.partial)
		}
		if r.stdout != "" && !strings.Contains(r.stderr, "\nHint: the dump stopped there: what it printed is incomplete\n") {
			t.Errorf("strata %s: printed %d bytes and does not say they are incomplete:\n%s", strings.Join(tc.args, " "), len(r.stdout), r.stderr)
		}
	}
	if r := cli(t, "", "dump", "--json", db); !strings.Contains(r.stdout, `"id": "a-intact"`) {
		t.Errorf("dump --json does not hold the session before the damaged one:\n%.300s", r.stdout)
	}

	r := cli(t, "", "verify", db)
	wantCode(t, r, exitProblems, "verify")
	if !strings.Contains(r.stdout, `session "b-damaged": `) || !strings.Contains(r.stdout, "checksum mismatch") {
		t.Errorf("verify does not name the damaged session's checksum:\n%s", r.stdout)
	}
	mustCLI(t, "resume", "--db", db, "--session", "a-intact")
	mustCLI(t, "dump", "--session", "a-intact", db)
	mustCLI(t, "stats", "--session", "a-intact", db)
}

// The same through a live agent's debug handler: an answer refused before
// it began says the damage and hints at verify; an answer cut midway (a
// dump, whose status line has gone out) is an error that hints at verify.
func TestDamaged_ReadingCommandsFailRemote(t *testing.T) {
	t.Parallel()
	path, damage := damagedDB(t)
	damage()
	d, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	debughttp.Register(mux, d, debughttp.Options{})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); d.Close() })
	url := srv.URL + debughttp.DefaultPrefix

	for _, args := range [][]string{{"stats", url}, {"sessions", url}, {"resume", "--db", url, "--session", "b-damaged"}, {"resume", url, "--session", "b-damaged"}} {
		r := cli(t, "", args...)
		wantCode(t, r, exitError, args...)
		if !strings.Contains(r.stderr, `store: database is damaged: session "b-damaged"`) ||
			!strings.HasSuffix(r.stderr, "Hint: the database is damaged; to list every problem it holds, run: strata verify "+url+"\n") {
			t.Errorf("strata %s: stderr\n%s", strings.Join(args, " "), r.stderr)
		}
	}
	r := cli(t, "", "dump", url)
	wantCode(t, r, exitError, "dump", url)
	if !strings.Contains(r.stderr, "transfer cut") || !strings.Contains(r.stderr, "Hint: "+hintCut+"\n") {
		t.Errorf("dump %s: stderr\n%s", url, r.stderr)
	}
}

// A panic inside bbolt, recovered as damage, never reaches the user without
// the hint to run verify.
func TestExplainDamage(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		errmark.Mark(errors.New("bbolt panicked: runtime error: slice bounds out of range [:4117] with capacity 4096"), store.ErrCorrupt),
		errors.Wrap(&store.CorruptError{Session: "s", Bucket: "nodes", Key: "3", Err: errors.New("bbolt panicked: runtime error: slice bounds out of range")}, "dump"),
		&HTTPError{URL: "http://h/debug/strata/stats", Status: "500 Internal Server Error", Message: store.ErrCorrupt.Error() + `: session "s" nodes key 3: checksum mismatch`},
		&HTTPError{URL: "http://h/debug/strata/dump", Status: "500 Internal Server Error", Message: "bbolt panicked: runtime error: index out of range [7] with length 4", Damaged: true},
	} {
		var b bytes.Buffer
		printError(&b, explainDamage(err, "my db.db"))
		if !strings.HasSuffix(b.String(), "\nHint: the database is damaged; to list every problem it holds, run: strata verify 'my db.db'\n") {
			t.Errorf("%v:\n%s", err, b.String())
		}
	}
	for _, err := range []error{store.ErrSessionNotFound, store.ErrLocked, &HTTPError{Status: "404 Not Found", Message: "store: session not found"},
		&HTTPError{Status: "500 Internal Server Error", Message: "bbolt panicked: runtime error"}} {
		if got := explainDamage(err, "x.db"); len(errors.GetAllHints(got)) != 0 {
			t.Errorf("%v: hints %q", err, errors.GetAllHints(got))
		}
	}
}

// A handler that answers a panic inside bbolt with "damaged": true: every
// reading command's error on its URL hints at verify, though the message
// does not say "damaged".
func TestDamaged_RemotePanicHintsVerify(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc(debughttp.DefaultPrefix+"/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(debughttp.HandlerHeader, debughttp.HandlerVersion)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(`{"error":"bbolt panicked: runtime error: slice bounds out of range [:4117] with capacity 4096","damaged":true}` + "\n"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	url := srv.URL + debughttp.DefaultPrefix
	for _, args := range [][]string{{"dump", url}, {"dump", "--json", url}, {"stats", url}, {"sessions", url}, {"resume", url, "--session", "s"}} {
		r := cli(t, "", args...)
		wantCode(t, r, exitError, args...)
		r.stderr = asText(t, r.stderr)
		if !strings.Contains(r.stderr, "bbolt panicked") || !strings.HasSuffix(r.stderr, "Hint: the database is damaged; to list every problem it holds, run: strata verify "+url+"\n") {
			t.Errorf("strata %s: stderr\n%s", strings.Join(args, " "), r.stderr)
		}
	}
}

// One bit less in the element count of a leaf page of a session's nodes
// table makes bbolt skip nodes without breaking a checksum. sessions and
// stats, which count the nodes, exit 1 with the verify hint rather than
// print a count short by the skipped nodes; verify finds it (exit 3).
func TestDamaged_LeafCountFailsTheCounts(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	s, err := store.Open(db, store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 40; i++ {
		if _, err := s.Append("s", tier.Event{Kind: tier.KindUser, Text: fmt.Sprintf("step %d", i)}); err != nil {
			t.Fatal(err)
		}
		p, err := s.PlanSpan("s", uint64(i), compaction.DefaultBudget)
		if err != nil {
			t.Fatal(err)
		}
		// The summary claims what the span requires: the user's request.
		if _, err := s.Commit(p, store.Summary{Narrative: strings.Repeat(fmt.Sprintf("step %d. ", i), 10), Claims: p.Required.Claims(), Summarizer: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, cli(t, "", "verify", db), exitOK, "verify (before the damage)")

	// The nodes table's first leaf, down its leftmost children.
	bdb, err := bolt.Open(db, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var id uint64
	if err := bdb.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("s/s")).Bucket([]byte("nodes"))
		if b.Root() == 0 {
			return errors.New("the nodes table is inline")
		}
		id = uint64(b.Root())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ps := bdb.Info().PageSize
	bdb.Close()
	raw := readBytes(t, db)
	page := func() []byte { return raw[int(id)*ps : int(id+1)*ps] }
	for binary.LittleEndian.Uint16(page()[8:]) == 0x01 { // a branch: its first child
		id = binary.LittleEndian.Uint64(page()[16+8:])
	}
	n := binary.LittleEndian.Uint16(page()[10:])
	binary.LittleEndian.PutUint16(page()[10:], n&^(n&-n)) // one bit less
	if err := os.WriteFile(db, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	hint := "Hint: the database is damaged; to list every problem it holds, run: strata verify " + shellQuote(db) + "\n"
	for _, args := range [][]string{{"sessions", db}, {"sessions", "--json", db}, {"stats", db}, {"stats", "--json", db}, {"stats", "--session", "s", db}} {
		r := cli(t, "", args...)
		wantCode(t, r, exitError, args...)
		r.stderr = asText(t, r.stderr) // --json: the same error as a JSON line
		if !strings.HasPrefix(r.stderr, "Error: store: database is damaged: ") || !strings.HasSuffix(r.stderr, hint) {
			t.Errorf("strata %s: stderr does not say the damage and hint at verify:\n%s", strings.Join(args, " "), r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("strata %s printed counts of a damaged table:\n%s", strings.Join(args, " "), r.stdout)
		}
	}
	wantCode(t, cli(t, "", "verify", db), exitProblems, "verify")
}

// A root page that a lost write left holding another bucket's old page is
// damage to every command, verify included — never "not a strata database".
func TestDamaged_RootPageIsDamage(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	s, err := store.Open(db, store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	dbtest.ReplayIncident(t, s, "s", compaction.Extractive{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	bdb, err := bolt.Open(db, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var root, sess uint64
	if err := bdb.View(func(tx *bolt.Tx) error {
		root, sess = uint64(tx.Cursor().Bucket().Root()), uint64(tx.Bucket([]byte("s/s")).Root())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ps := bdb.Info().PageSize
	bdb.Close()
	raw := readBytes(t, db)
	page := func(id uint64) []byte { return raw[int(id)*ps : int(id+1)*ps] }
	for binary.LittleEndian.Uint16(page(sess)[8:]) == 0x01 { // a branch: its first child
		sess = binary.LittleEndian.Uint64(page(sess)[16+8:])
	}
	copy(page(root), page(sess))
	binary.LittleEndian.PutUint64(page(root), root)
	if err := os.WriteFile(db, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "verify", db)
	wantCode(t, r, exitProblems, "verify")
	if !strings.Contains(r.stdout, "root page") || strings.Contains(r.stdout+r.stderr, "not a strata database") {
		t.Errorf("strata verify: stdout does not report the damaged root page:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	for _, args := range [][]string{{"sessions", db}, {"stats", db}, {"dump", db}, {"resume", "--db", db, "--session", "s"}} {
		r := cli(t, "", args...)
		if r.code == exitOK || !strings.Contains(r.stderr, "database is damaged") || strings.Contains(r.stderr, "not a strata database") {
			t.Errorf("strata %s: exit %d, stderr:\n%s\nwant it to say the database is damaged", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}
