package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-go/strata/debughttp"
	"github.com/strata-go/strata/internal/pgtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// The commands on a postgres:// URL do what they do on a file: the same
// replay, and resume gives the same bytes; dump, stats and verify read it.
func TestPostgres_SameAsFile(t *testing.T) {
	for _, flags := range [][]string{
		{"--every", "2", "--fold", "2"},
		{"--every", "2", "--summarizer", "lossy"},
		{"--every", "1", "--fold", "2", "--max-roots", "2"},
	} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			url := pgtest.URL(t)
			file := tempDB(t)
			for _, db := range []string{file, url} {
				if out := mustCLI(t, append(append([]string{"replay", "--db", db}, flags...), incident(t))...); !strings.Contains(out, "compacted") && !strings.Contains(out, "refused") {
					t.Fatalf("replay compacted nothing:\n%s", out)
				}
			}
			sessions := sessionsOf(t, url)
			if !reflect.DeepEqual(sessions, sessionsOf(t, file)) || len(sessions) != 1 {
				t.Fatalf("sessions %v in PostgreSQL, %v in the file", sessions, sessionsOf(t, file))
			}
			for _, s := range sessions {
				p, f := resume(t, url, s), resume(t, file, s)
				if !reflect.DeepEqual(p, f) {
					t.Errorf("session %s resumes differently:\npostgres: %+v\nfile: %+v", s, p, f)
				}
			}
			// dump --json: the same but for the format's version, the
			// schema's.
			dump := func(db string) map[string]any {
				var m map[string]any
				if err := json.Unmarshal([]byte(mustCLI(t, "dump", "--json", db)), &m); err != nil {
					t.Fatal(err)
				}
				delete(m, "format_version")
				return m
			}
			if p, f := dump(url), dump(file); !reflect.DeepEqual(p, f) {
				t.Errorf("dump --json differs between PostgreSQL and the file")
			}
			if out := mustCLI(t, "stats", url); !strings.Contains(out, "sessions") {
				t.Errorf("stats:\n%s", out)
			}
			if out := mustCLI(t, "verify", url); out != "ok\n" {
				t.Errorf("verify: %q", out)
			}
		})
	}
}

// verify of a PostgreSQL store names a row an SQL UPDATE changed, and
// exits 3; resume refuses to read it.
func TestPostgres_VerifyFindsUpdatedRow(t *testing.T) {
	url := pgtest.URL(t)
	mustCLI(t, "replay", "--db", url, "--every", "2", incident(t))
	pgtest.Exec(t, url, `UPDATE strata_events SET value = value || '\x00'::bytea WHERE seq = 3`)
	r := cli(t, "", "verify", url)
	wantCode(t, r, exitProblems, "verify", url)
	if !strings.Contains(r.stdout, `session "mig" l0 key 3`) || !strings.Contains(r.stdout, "checksum mismatch") {
		t.Errorf("verify does not name the damaged event:\n%s", r.stdout)
	}
	r = cli(t, "", "dump", "--raw", url)
	wantCode(t, r, exitError, "dump", "--raw", url)
	if !strings.Contains(r.stderr, "damaged") || !strings.Contains(r.stderr, "strata verify") {
		t.Errorf("dump --raw of a damaged store:\n%s", r.stderr)
	}
}

// strata serve of a postgres:// URL: the page and the JSON endpoints
// answer from the store — the reading commands print through it what they
// print from the URL itself, and its backup is a bbolt file that verifies
// and resumes to the server's bytes, as strata backup URL FILE writes it.
// A writer appends meanwhile, not blocked by serve's read: an append
// returns while a dump's read transaction is open on the server, and the
// dump is the snapshot from before it. The password in the URL is not
// printed.
func TestPostgres_Serve(t *testing.T) {
	url := pgtest.URL(t)
	mustCLI(t, "replay", "--db", url, "--every", "2", "--summarizer", "lossy", "--drop", "artifacts", incident(t))
	// The URL serve is given: its connections named, so that the test
	// finds their transactions on the server, and a password, which the
	// test server does not ask for (it trusts, as .ci/run and
	// docs/postgres.md start it) and serve must not print.
	pu, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	app := "strata-serve-" + pu.Query().Get("search_path")
	if _, has := pu.User.Password(); !has {
		pu.User = neturl.UserPassword(pu.User.Username(), "s3cret-pw")
	}
	password, _ := pu.User.Password()
	served := pgtest.WithParam(t, pu.String(), "application_name", app)
	s := startServe(t, nil, served)
	if s.base == "" {
		code, stderr := s.wait(t)
		t.Fatalf("strata serve did not start: exit %d\n%s", code, stderr)
	}

	if code, body, err := fetch(t, s.base+debughttp.PagePath); err != nil || code != 200 || !strings.Contains(body, "<title>strata</title>") {
		t.Errorf("the page: %d %v\n%.200s", code, err, body)
	}
	if code, body, err := fetch(t, s.base+"/session?session=mig"); err != nil || code != 200 || !strings.Contains(body, `"item": "migrations/003_down.sql"`) {
		t.Errorf("the session: %d %v\n%.300s", code, err, body)
	}
	// Through serve, each command waits as long as it takes (a bound on a
	// hang): an answer starts once it is read or built whole.
	const at, patient = "@DB@", "--timeout=1m"
	for _, c := range [][]string{
		{"sessions", "--json", at}, {"stats", "--json", at}, {"stats", "--session", "mig", at}, {"dump", "--json", at},
		{"dump", "--raw", "--session", "mig", at}, {"dump", "--dot", at}, {"resume", "--db", at, "--session", "mig", "--json"},
	} {
		args := func(db string) []string {
			out := slices.Clone(c)
			out[slices.Index(out, at)] = db
			return out
		}
		if got, want := mustCLI(t, append(args(s.base), patient)...), mustCLI(t, args(url)...); got != want {
			t.Errorf("strata %s through serve:\n%s", strings.Join(args(s.base), " "), firstDiff(got, want))
		}
	}

	// The backup through serve: verifies, resumes as the server does, and
	// holds what strata backup URL FILE writes.
	dir := t.TempDir()
	copied, direct := filepath.Join(dir, "served.db"), filepath.Join(dir, "direct.db")
	mustCLI(t, "backup", patient, s.base, copied)
	mustCLI(t, "backup", url, direct)
	if out := mustCLI(t, "verify", copied); out != "ok\n" {
		t.Errorf("verify of the backup through serve: %q", out)
	}
	if got, want := resume(t, copied, "mig"), resume(t, url, "mig"); got.SHA256 != want.SHA256 {
		t.Errorf("the backup through serve resumes to %s, the server to %s", got.SHA256, want.SHA256)
	}
	dump := []string{"dump", "--json", "--raw"}
	if got, want := mustCLI(t, append(dump, copied)...), mustCLI(t, append(dump, direct)...); got != want {
		t.Errorf("the backup through serve differs from strata backup URL FILE's:\n%.300s", firstDiff(got, want))
	}
	if out := mustCLI(t, "verify", patient, s.base); out != "ok\n" {
		t.Errorf("verify through serve: %q", out)
	}

	// Session big: 16 MiB of events, a dump of which fills the sockets'
	// buffers many times over, so that serve's read stays open until the
	// test reads it.
	w, err := store.Open(url, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	big := make([]tier.Event, 16)
	for i := range big {
		big[i] = tier.Event{Kind: tier.KindAssistant, Text: strings.Repeat(string(rune('a'+i)), 1<<20)}
	}
	if _, err := w.Append("big", big...); err != nil {
		t.Fatal(err)
	}

	// A dump of big, read 4 KiB at a time through a small receive buffer:
	// serve's read transaction stays open on the server.
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			err = c.(*net.TCPConn).SetReadBuffer(16 << 10)
		}
		return c, err
	}}}
	t.Cleanup(client.CloseIdleConnections)
	resp, err := client.Get(s.base + "/dump?raw=1&session=big")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	head := make([]byte, 4096)
	if _, err := io.ReadFull(resp.Body, head); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the dump of big: %s %v", resp.Status, err)
	}
	// openTx says when serve's transaction began, in µs since the epoch: 0
	// when none is open.
	openTx := func() int64 {
		t.Helper()
		return pgtest.QueryInt(t, url, `SELECT coalesce(max((extract(epoch FROM xact_start) * 1000000)::bigint), 0)
			FROM pg_stat_activity WHERE application_name = $1 AND xact_start IS NOT NULL`, app)
	}
	began := openTx()
	if began == 0 {
		t.Fatal("no transaction of serve is open while its dump is being sent")
	}
	appended := make(chan error, 1)
	const late = "appended while serve read"
	go func() {
		_, err := w.Append("big", tier.Event{Kind: tier.KindUser, Text: late})
		appended <- err
	}()
	select {
	case err := <-appended:
		if err != nil {
			t.Fatalf("an append while serve read: %v", err)
		}
	case <-time.After(time.Minute): // a bound on a hang, not a measure of speed
		t.Fatal("an append waited a minute beside serve's read")
	}
	if still := openTx(); still != began {
		t.Fatalf("serve's transaction (begun at %d µs) ended before the append returned (now %d): the dump was sent whole before it", began, still)
	}
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Sessions []struct {
			Head   uint64            `json:"head_seq"`
			Events []json.RawMessage `json:"events"`
		} `json:"sessions"`
	}
	body := append(head, rest...)
	if err := json.Unmarshal(body, &doc); err != nil || len(doc.Sessions) != 1 || doc.Sessions[0].Head != 16 ||
		len(doc.Sessions[0].Events) != 16 || bytes.Contains(body, []byte(late)) {
		t.Errorf("the dump read across the append is not the snapshot before it: %v, %d bytes", err, len(body))
	}
	if code, body, err := fetch(t, s.base+"/"); err != nil || code != 200 || !strings.Contains(body, `"head_seq": 17`) {
		t.Errorf("the index after the append: %d %v\n%s", code, err, body)
	}

	exit, stderr := s.stop(t)
	want := "serving " + shownDB(served) + " read-only: open " + s.base + "/ui/"
	if exit != 130 || !strings.HasPrefix(stderr, want) || strings.Contains(stderr, password) {
		t.Errorf("after Ctrl-C: exit %d, stderr:\n%s\nwant it to begin %q, without the password", exit, stderr, want)
	}
}

// The hints of an error on a postgres:// URL — the database damaged (run
// verify), a session it does not hold (run sessions) — name the URL
// without its password, as every other line does: for claude-code status
// of a store the hooks' settings name, as text and in its --json document,
// and for a reading command given the URL.
func TestPostgres_HintsHideThePassword(t *testing.T) {
	url := pgtest.URL(t)
	pu, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	if _, has := pu.User.Password(); !has {
		pu.User = neturl.UserPassword(pu.User.Username(), "s3cret-pw") // the test server trusts
	}
	password, _ := pu.User.Password()
	url = pu.String()
	mustCLI(t, "replay", "--db", url, "--every", "2", incident(t))

	r := cli(t, "", "resume", "--session", "nope", url)
	wantCode(t, r, exitError, "resume", "--session", "nope")
	if !strings.Contains(r.stderr, "Hint: to list the sessions, run: strata sessions ") || strings.Contains(r.stderr, password) {
		t.Errorf("resume of a missing session: stderr\n%s\nwant the sessions hint, without the password", r.stderr)
	}

	pgtest.Exec(t, url, `UPDATE strata_events SET value = value || '\x00'::bytea WHERE seq = 3`)
	r = cli(t, "", "dump", "--raw", url)
	wantCode(t, r, exitError, "dump", "--raw")
	if !strings.Contains(r.stderr, "Hint: the database is damaged; to list every problem it holds, run: strata verify ") || strings.Contains(r.stderr, password) {
		t.Errorf("dump of a damaged store: stderr\n%s\nwant the verify hint, without the password", r.stderr)
	}

	dir, _ := newProject(t, nil)
	mustCLI(t, "claude-code", "install", "--dir", dir, "--db", url)
	for _, args := range [][]string{{"--json"}, nil} {
		r := cli(t, "", append([]string{"claude-code", "status", "--dir", dir}, args...)...)
		wantCode(t, r, exitError, append([]string{"claude-code", "status"}, args...)...)
		if !strings.Contains(asText(t, r.stderr), "Hint: the database is damaged; to list every problem it holds, run: strata verify ") ||
			strings.Contains(r.stderr, password) || strings.Contains(r.stdout, password) {
			t.Errorf("claude-code status %v of a damaged store: stdout\n%s\nstderr\n%s\nwant the verify hint, and the password nowhere", args, r.stdout, r.stderr)
		}
	}
}

// A failed replay or import into PostgreSQL leaves nothing its open made,
// as one into a new file leaves no file: in a schema without strata's
// tables, a missing file or bad input leaves none of them (the schema and
// a table of its own stay); where strata's tables were there before, empty
// or holding a session, they stay; and the tables a failed replay stored
// lines in stay, with them.
func TestPostgres_FailureLeavesNothingItMade(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.jsonl")
	bad := writeFile(t, "bad.jsonl", `{"session":"s","kind":"user","text":"a"}`+"\n"+`{"kind":`+"\n")
	tables := func(url string) int64 {
		return pgtest.QueryInt(t, url, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE 'strata\_%'`)
	}
	failing := [][]string{
		{"replay", "--db", "DB", missing},
		{"replay", "--db", "DB", "--session", "s", "-"},
		{"replay", "--db", "DB", writeFile(t, "worse.jsonl", `{"kind":"nope"}`+"\n")},
		{"import", "--format", "openai", "--db", "DB", missing},
		{"import", "--format", "openai", "--db", "DB", writeFile(t, "broken.json", `[{"role":"user",`)},
	}
	run := func(url string, args []string) {
		args = slices.Clone(args)
		args[slices.Index(args, "DB")] = url
		wantCode(t, cli(t, `{"kind":"tool_result","id":"never-opened"}`+"\n", args...), exitError, args...)
	}
	for _, args := range failing {
		url := pgtest.URL(t)
		pgtest.Exec(t, url, `CREATE TABLE theirs (x int)`)
		run(url, args)
		if n := tables(url); n != 0 {
			t.Errorf("strata %s: left %d strata tables in a schema that had none", strings.Join(args, " "), n)
		}
		if n := pgtest.QueryInt(t, url, `SELECT count(*) FROM theirs`); n != 0 {
			t.Errorf("the schema's own table: %d rows", n)
		}
	}

	// strata's tables there before, empty: they stay.
	made := pgtest.URL(t)
	db, err := store.Open(made, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	want := tables(made)
	if want == 0 {
		t.Fatal("store.Open with Create made no tables")
	}
	// And holding a session.
	held := pgtest.URL(t)
	mustCLI(t, "replay", "--db", held, "--every", "2", incident(t))
	for _, url := range []string{made, held} {
		for _, args := range failing {
			run(url, args)
			if n := tables(url); n != want {
				t.Errorf("strata %s: %d strata tables left of %d there before", strings.Join(args, " "), n, want)
			}
		}
	}
	if got := sessionsOf(t, held); !slices.Equal(got, []string{"mig"}) {
		t.Errorf("sessions %q after the failures, want mig", got)
	}

	// Replay stores the lines before the bad one: its tables stay.
	url := pgtest.URL(t)
	wantCode(t, cli(t, "", "replay", "--db", url, bad), exitError, "replay bad")
	if got := sessionsOf(t, url); !slices.Equal(got, []string{"s"}) {
		t.Errorf("sessions %q, want s with the line before the bad one", got)
	}
}
