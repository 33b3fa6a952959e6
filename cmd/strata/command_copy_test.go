package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/strata-go/strata/companion"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/internal/pgtest"
)

// copySource returns a database file holding the incident compacted
// (session mig), the demo's session refused by the lossy summarizer
// (session migration), and the first two real sessions when present.
func copySource(t *testing.T) string {
	t.Helper()
	db := replayed(t, []string{"--every", "2", "--fold", "2"}, incident(t))
	demo, err := filepath.Abs(filepath.Join("..", "..", "testdata", "demo", "session.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	mustCLI(t, "replay", "--db", db, "--summarizer", "lossy", "--every-tokens", "200", demo)
	if real := dbtest.RealSessionFiles(); len(real) > 0 {
		mustCLI(t, append([]string{"replay", "--db", db, "--every-events", "20"}, real[:min(2, len(real))]...)...)
	}
	return db
}

// sameSessions checks that b verifies and holds the sessions of a, each
// resuming to the same bytes.
func sameSessions(t *testing.T, a, b string) {
	t.Helper()
	if out := mustCLI(t, "verify", b); out != "ok\n" {
		t.Errorf("verify %s: %q", b, out)
	}
	ids := sessionsOf(t, a)
	if got := sessionsOf(t, b); !slices.Equal(got, ids) {
		t.Fatalf("sessions %v, want %v", got, ids)
	}
	for _, id := range ids {
		if x, y := resume(t, a, id), resume(t, b, id); x.SHA256 != y.SHA256 || x.Context != y.Context {
			t.Errorf("session %s resumes to %s, from the source %s", id, y.SHA256, x.SHA256)
		}
	}
}

// copyJSONOf runs `copy --json` and decodes it.
func copyJSONOf(t *testing.T, args ...string) copyJSON {
	t.Helper()
	out := mustCLI(t, append([]string{"copy", "--json"}, args...)...)
	var r copyJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("copy --json: %v\n%s", err, out)
	}
	return r
}

// TestCopy_Files copies a file into a new file and into an existing one:
// the same sessions, resumed to the same bytes; the line and --json say
// what was copied; a second copy finds every session present.
func TestCopy_Files(t *testing.T) {
	t.Parallel()
	src := copySource(t)
	ids := sessionsOf(t, src)
	dir := t.TempDir()
	dst := filepath.Join(dir, "copy.db")
	out := mustCLI(t, "copy", src, dst)
	if !regexp.MustCompile(`^copied ` + regexp.QuoteMeta(dst) + ` sessions=` + fmt.Sprint(len(ids)) + ` present=0 events=\d+ bytes=\d+\n$`).MatchString(out) {
		t.Errorf("stdout %q", out)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left behind: %v", ents)
	}
	sameSessions(t, src, dst)

	again := copyJSONOf(t, src, dst)
	if again.Sessions != 0 || len(again.IDs) != 0 || !slices.Equal(again.Present, ids) || again.Events != 0 || again.Dst != dst || again.Src != src {
		t.Errorf("the copy run again: %+v, want every session present", again)
	}

	// Into an existing database, one session.
	part := replayed(t, []string{"--every", "2"}, writeFile(t, "other.jsonl", `{"session":"other","kind":"user","text":"another session"}`+"\n"))
	r := copyJSONOf(t, "--session", "mig", src, part)
	if r.Sessions != 1 || !slices.Equal(r.IDs, []string{"mig"}) || r.Events != 41 || r.Bytes <= 0 || len(r.Completed) != 0 {
		t.Errorf("copy --session mig: %+v", r)
	}
	if got := sessionsOf(t, part); !slices.Equal(got, []string{"mig", "other"}) {
		t.Errorf("the destination holds %v", got)
	}
	if a, b := resume(t, src, "mig"), resume(t, part, "mig"); a.SHA256 != b.SHA256 {
		t.Errorf("mig resumes to %s in the destination, %s in the source", b.SHA256, a.SHA256)
	}
}

// TestCopy_RefusesExisting: a destination that holds another session of
// an id to copy is refused, naming the id, before anything is written.
func TestCopy_RefusesExisting(t *testing.T) {
	t.Parallel()
	src := copySource(t)
	dst := replayed(t, nil, writeFile(t, "mig.jsonl", `{"session":"mig","kind":"user","text":"another mig"}`+"\n"))
	before := readBytes(t, dst)
	r := cli(t, "", "copy", src, dst)
	wantCode(t, r, exitError, "copy", src, dst)
	if !strings.Contains(r.stderr, `Error: store: the destination holds another session of the same id: "mig"`) || !strings.Contains(r.stderr, "Hint: nothing was copied") {
		t.Errorf("stderr %q", r.stderr)
	}
	if !slices.Equal(readBytes(t, dst), before) {
		t.Errorf("a refused copy changed the destination file")
	}
	// --session picks the others.
	others := slices.DeleteFunc(sessionsOf(t, src), func(id string) bool { return id == "mig" })
	args := []string{"copy"}
	for _, id := range others {
		args = append(args, "--session", id)
	}
	mustCLI(t, append(args, src, dst)...)
	if got := sessionsOf(t, dst); !slices.Equal(got, sessionsOf(t, src)) {
		t.Errorf("the destination holds %v", got)
	}
}

func TestCopy_Usage(t *testing.T) {
	t.Parallel()
	src := copySource(t)
	for _, args := range [][]string{
		{src},
		{src, src},
		{src, "-"},
		{"http://127.0.0.1:6060/debug/strata", tempDB(t)},
		{"--session", "", src, tempDB(t)},
		{"--timeout", "0s", src, tempDB(t)},
	} {
		r := cli(t, "", append([]string{"copy"}, args...)...)
		wantCode(t, r, exitUsage, append([]string{"copy"}, args...)...)
	}
	r := cli(t, "", "copy", src+".absent", tempDB(t))
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "does not exist") {
		t.Errorf("stderr %q", r.stderr)
	}
	dir := t.TempDir()
	r = cli(t, "", "copy", "--session", "absent", src, filepath.Join(dir, "x.db"))
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, `"absent": store: session not found`) {
		t.Errorf("stderr %q", r.stderr)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a failed copy left %v", ents)
	}
}

// TestCopy_Progress: with progress on, stderr shows the events copied.
func TestCopy_Progress(t *testing.T) {
	src := copySource(t)
	t.Setenv(progressEnv, "1")
	old := progressEvery
	progressEvery = 0
	defer func() { progressEvery = old }()
	r := cli(t, "", "copy", src, tempDB(t))
	wantCode(t, r, exitOK)
	if !regexp.MustCompile(`copy: [\d,]+ of [\d,]+ events`).MatchString(r.stderr) {
		t.Errorf("stderr %q", r.stderr)
	}
}

// TestPostgres_Copy moves sessions from a file into PostgreSQL, from there
// into another schema, and back into a file: each verifies and resumes
// every session to the source's bytes.
func TestPostgres_Copy(t *testing.T) {
	file := copySource(t)
	fleet, other := pgtest.URL(t), pgtest.URL(t)
	home := filepath.Join(t.TempDir(), "home.db")
	for _, step := range [][2]string{{file, fleet}, {fleet, other}, {other, home}} {
		r := copyJSONOf(t, step[0], step[1])
		if r.Sessions != len(sessionsOf(t, file)) || len(r.Present) != 0 {
			t.Errorf("copy %s %s: %+v", step[0], step[1], r)
		}
		sameSessions(t, file, step[1])
	}
	// The dumps are the same but for the format's version.
	dump := func(db string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(mustCLI(t, "dump", "--json", "--raw", db)), &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "format_version")
		return m
	}
	if a, b := dump(file), dump(home); !reflect.DeepEqual(a, b) {
		t.Errorf("the file taken home dumps differently from the first")
	}
	// Into PostgreSQL again: every session is there as it is in the file.
	if r := copyJSONOf(t, file, fleet); r.Sessions != 0 || len(r.Present) != len(sessionsOf(t, file)) {
		t.Errorf("the copy run again: %+v", r)
	}
	// Once the file's mig has moved on, PostgreSQL's is another: refused.
	mustCLI(t, "replay", "--db", file, writeFile(t, "more.jsonl", `{"session":"mig","kind":"user","text":"one more turn"}`+"\n"))
	r := cli(t, "", "copy", file, fleet)
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, `the destination holds another session of the same id: "mig"`) {
		t.Errorf("stderr %q", r.stderr)
	}
}

// TestPostgres_Backup: a backup of a PostgreSQL store is a bbolt file that
// verifies and resumes every session to the same bytes; DEST - is bad
// usage.
func TestPostgres_Backup(t *testing.T) {
	url := pgtest.URL(t)
	mustCLI(t, "copy", copySource(t), url)
	dir := t.TempDir()
	dst := filepath.Join(dir, "out.db")
	out := mustCLI(t, "backup", url, dst)
	fi, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("backup %s bytes=%d sessions=%d\n", dst, fi.Size(), len(sessionsOf(t, url))); out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left behind: %v", ents)
	}
	sameSessions(t, url, dst)
	// Again, over the file: replaced whole.
	mustCLI(t, "backup", url, dst)
	sameSessions(t, url, dst)

	r := cli(t, "", "backup", url, "-")
	wantCode(t, r, exitUsage)
	if !strings.Contains(r.stderr, "name the file") {
		t.Errorf("stderr %q", r.stderr)
	}
}

// TestPostgres_CopyDamaged: a row changed by SQL stops a copy out of
// PostgreSQL with the damage named, and leaves no file; a copy into it
// too. The hint runs verify on the damaged database, SRC or DST.
func TestPostgres_CopyDamaged(t *testing.T) {
	url := pgtest.URL(t)
	file := copySource(t)
	mustCLI(t, "copy", file, url)
	pgtest.Exec(t, url, `UPDATE strata_events SET value = value || '\x00'::bytea WHERE session = 'mig' AND seq = 3`)
	verifyURL := "Hint: the database is damaged; to list every problem it holds, run: strata verify " + shellQuote(url) + "\n"
	dir := t.TempDir()
	for _, cmd := range []string{"copy", "backup"} {
		r := cli(t, "", cmd, url, filepath.Join(dir, "out.db"))
		wantCode(t, r, exitError, cmd)
		if !strings.Contains(r.stderr, `session "mig" l0 key 3`) || !strings.Contains(r.stderr, verifyURL) {
			t.Errorf("%s: stderr %q", cmd, r.stderr)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("%s of a damaged store left %v", cmd, ents)
		}
	}
	r := cli(t, "", "copy", file, url)
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, `session "mig" l0 key 3`) || !strings.Contains(r.stderr, verifyURL) || strings.Contains(r.stderr, "strata verify "+file) {
		t.Errorf("copy into the damaged store: stderr %q", r.stderr)
	}
}

// TestCopy_DSTHints: an error about DST gets the hints of DST — what the
// file is — and none about SRC.
func TestCopy_DSTHints(t *testing.T) {
	t.Parallel()
	src := tempDB(t)
	mustCLI(t, "replay", "--db", src, writeFile(t, "s.jsonl", `{"session":"s","kind":"user","text":"hi"}`+"\n"))
	dir := t.TempDir()
	lite := filepath.Join(dir, "lite.db")
	zeroed := filepath.Join(dir, "zeroed.db")
	sub := filepath.Join(dir, "sub")
	for path, data := range map[string][]byte{lite: append([]byte("SQLite format 3\x00"), make([]byte, 4096)...), zeroed: make([]byte, 8192)} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dst, hint string }{
		{lite, "Hint: " + lite + " is a SQLite database\n"},
		{zeroed, "Hint: " + zeroed + " is zero bytes where a database's first page belongs"},
		{sub, ""},
	} {
		r := cli(t, "", "copy", src, c.dst)
		wantCode(t, r, exitError, "copy", src, c.dst)
		if !strings.Contains(r.stderr, "Error: copy: DST: "+c.dst) || !strings.Contains(r.stderr, c.hint) || strings.Contains(r.stderr, "Hint: "+src) {
			t.Errorf("copy %s %s: stderr %q, want the hint %q", src, c.dst, r.stderr, c.hint)
		}
	}
	// A DST another process holds: the hint names that process.
	held := tempDB(t)
	mustCLI(t, "copy", src, held)
	pid := holdForWriting(t, held)
	r := cli(t, "", "copy", "--timeout", "300ms", src, held)
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "another process holds the database") || !strings.Contains(r.stderr, "Hint: --timeout waits longer") ||
		runtime.GOOS == "linux" && !strings.Contains(r.stderr, fmt.Sprintf("Hint: held by process %d (", pid)) {
		t.Errorf("copy into a held DST: stderr %q", r.stderr)
	}
}

// TestPostgres_Stats: stats of PostgreSQL names the tables' size, not a
// file's.
func TestPostgres_Stats(t *testing.T) {
	url := pgtest.URL(t)
	mustCLI(t, "copy", copySource(t), url)
	out := mustCLI(t, "stats", url)
	if strings.Contains(out, "file bytes") || !regexp.MustCompile(`(?m)^tables bytes=[1-9]\d* per_event=\d+\.\d$`).MatchString(out) {
		t.Errorf("stats:\n%s", out)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(mustCLI(t, "stats", "--json", url)), &st); err != nil {
		t.Fatal(err)
	}
	if _, ok := st["file_bytes"]; ok || st["table_bytes"].(float64) <= 0 || st["table_bytes_per_event"].(float64) <= 0 {
		t.Errorf("stats --json: file_bytes %v, table_bytes %v, table_bytes_per_event %v", st["file_bytes"], st["table_bytes"], st["table_bytes_per_event"])
	}
}

// cancelOnWrite is a stderr that ends ctx, as SIGINT does, at the first
// progress line written to it.
type cancelOnWrite struct {
	buf    bytes.Buffer
	cancel context.CancelCauseFunc
}

// Write implements io.Writer.
func (w *cancelOnWrite) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("copy: ")) {
		w.cancel(&interruptError{sig: syscall.SIGINT})
	}
	return w.buf.Write(p)
}

func (w *cancelOnWrite) String() string { return w.buf.String() }

// TestInterrupt_Copy: Ctrl-C after the first transaction of a copy into
// an existing file: exit 130, stderr says which session is left without
// its state, verify names it, and the same copy run again completes it.
func TestInterrupt_Copy(t *testing.T) {
	var jsonl strings.Builder
	for i := range 1500 { // two transactions of the copy
		fmt.Fprintf(&jsonl, `{"session":"big","kind":"user","text":"turn %d"}`+"\n", i)
	}
	src := replayed(t, []string{"--every", "0", "--every-tokens", "0"}, writeFile(t, "big.jsonl", jsonl.String()))
	dst := replayed(t, nil, writeFile(t, "other.jsonl", `{"session":"other","kind":"user","text":"another session"}`+"\n"))
	t.Setenv(progressEnv, "1")
	old := progressEvery
	progressEvery = 0
	defer func() { progressEvery = old }()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	errOut := &cancelOnWrite{cancel: cancel}
	var out bytes.Buffer
	code := runContext(ctx, []string{"copy", src, dst}, strings.NewReader(""), &out, errOut)
	if code != 130 {
		t.Fatalf("exit %d, want 130\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	if s := errOut.String(); !strings.Contains(s, "strata: interrupted by SIGINT") ||
		!strings.Contains(s, "copy: stopped after 0 sessions copied whole; session big is in DST without its state") {
		t.Errorf("stderr:\n%s", s)
	}
	r := cli(t, "", "verify", dst)
	wantCode(t, r, exitProblems, "verify", dst)
	if !strings.Contains(r.stdout, `session "big" state: missing`) {
		t.Errorf("verify:\n%s", r.stdout)
	}
	again := copyJSONOf(t, src, dst)
	if !slices.Equal(again.Completed, []string{"big"}) || again.Events != 1500-1024 {
		t.Errorf("the copy run again: %+v", again)
	}
	if out := mustCLI(t, "verify", dst); out != "ok\n" {
		t.Errorf("verify: %q", out)
	}
	if a, b := resume(t, src, "big"), resume(t, dst, "big"); a.SHA256 != b.SHA256 {
		t.Errorf("big resumes to %s, from the source %s", b.SHA256, a.SHA256)
	}
}

// A URL's password is shown as xxxxx wherever the URL holds it: in its
// user part or in its password parameter.
func TestShownDB_HidesThePassword(t *testing.T) {
	for _, tc := range []struct {
		db, want string
		password bool
	}{
		{"postgres://u:secret@h:5432/d?sslmode=disable", "postgres://u:xxxxx@h:5432/d?sslmode=disable", true},
		{"postgres://u@h/d?password=secret&sslmode=disable", "postgres://u@h/d?password=xxxxx&sslmode=disable", true},
		{"postgresql://u:secret@h/d?password=secret", "postgresql://u:xxxxx@h/d?password=xxxxx", true},
		{"postgres://u@h/d?sslmode=disable", "postgres://u@h/d?sslmode=disable", false},
		{"/tmp/strata.db", "/tmp/strata.db", false},
	} {
		if got := shownDB(tc.db); got != tc.want {
			t.Errorf("shownDB(%q) = %q, want %q", tc.db, got, tc.want)
		}
		if got := holdsPassword(tc.db); got != tc.password {
			t.Errorf("holdsPassword(%q) = %v, want %v", tc.db, got, tc.password)
		}
		command := "strata claude-code hook --db '" + tc.db + "' --budget 2000"
		if got, want := shownCommand(command), "strata claude-code hook --db '"+tc.want+"' --budget 2000"; got != want {
			t.Errorf("shownCommand(%q) = %q, want %q", command, got, want)
		}
	}
}

// A hook's command shows its URL without the password also when the
// password holds a character the shell quotes ('), as install writes it
// (shellQuote).
func TestShownCommand_HidesAQuotedPassword(t *testing.T) {
	for _, db := range []string{"postgres://u:pa'ss0rd@h/d", "postgres://u@h/d?password=it's%20me", "postgres://u:pa'ss0rd@h/d?password=o'k"} {
		for _, command := range []string{
			"strata claude-code hook --db " + shellQuote(db),
			"strata claude-code hook --db " + shellQuote(db) + " --budget 2000",
		} {
			got := shownCommand(command)
			if strings.Contains(got, "ss0rd") || strings.Contains(got, "s%20me") || strings.Contains(got, "o'\\''k") ||
				!strings.Contains(got, "xxxxx") {
				t.Errorf("shownCommand(%q) = %q: the password shows", command, got)
			}
			if words, ok := companion.ShellWords(got, nil); !ok || len(words) < 5 || words[4] != shownDB(db) {
				t.Errorf("shownCommand(%q) = %q: not the command with its URL shown as %q", command, got, shownDB(db))
			}
		}
	}
}

// copy --skip-damaged copies every session of SRC that reads intact and
// lists those that do not, exit 1; without it the damage stops the copy
// and DST is not made.
func TestCopy_SkipDamaged(t *testing.T) {
	t.Parallel()
	src, damage := damagedDB(t)
	damage()
	dst := tempDB(t)
	r := cli(t, "", "copy", src, dst)
	wantCode(t, r, exitError, "copy a damaged SRC")
	if _, err := os.Stat(dst); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed copy made DST: %v", err)
	}
	r = cli(t, "", "copy", "--skip-damaged", src, dst)
	wantCode(t, r, exitError, "copy --skip-damaged")
	if !strings.HasPrefix(r.stdout, "copied "+dst+" sessions=1 present=0 events=41 ") ||
		!strings.Contains(r.stdout, "\ndamaged session=b-damaged error=\"store: database is damaged: session \\\"b-damaged\\\" nodes key 1: checksum mismatch") {
		t.Errorf("stdout %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "Error: copy: sessions of SRC are damaged, not copied: b-damaged\n") ||
		!strings.Contains(r.stderr, "Hint: the database is damaged; to list every problem it holds, run: strata verify "+src) {
		t.Errorf("stderr %q", r.stderr)
	}
	if ids := sessionsOf(t, dst); len(ids) != 1 || ids[0] != "a-intact" {
		t.Errorf("DST holds %v", ids)
	}
	dbtest.MustVerify(t, dst)
	// Into an existing DST, as JSON: the intact session is there already.
	r = cli(t, "", "copy", "--skip-damaged", "--json", src, dst)
	wantCode(t, r, exitError, "copy --skip-damaged --json")
	var j copyJSON
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || j.Sessions != 0 || len(j.Present) != 1 || len(j.Damaged) != 1 ||
		j.Damaged[0].ID != "b-damaged" || !strings.Contains(j.Damaged[0].Error, "checksum mismatch") {
		t.Errorf("--json: %v %s", err, r.stdout)
	}
}
