package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-go/strata/debughttp"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
)

// liveAgent opens db for writing, as a running agent does (so that no
// other process can open the file), and serves it with debughttp on a test
// server; it returns the handler's URL.
func liveAgent(t *testing.T, db string, opts debughttp.Options) string {
	t.Helper()
	d, err := store.Open(db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	debughttp.Register(mux, d, opts)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		if err := d.Close(); err != nil {
			t.Error(err)
		}
		dbtest.MustVerify(t, db)
	})
	return srv.URL + debughttp.DefaultPrefix
}

// Every reading command gives through the URL of a live agent's handler
// the bytes it gives from the file.
func TestRemote_SameOutput(t *testing.T) {
	t.Parallel()
	db := replayed(t, []string{"--every", "2", "--fold", "2"}, incident(t), writeFile(t, "x.jsonl", `{"session":"other","kind":"user","text":"hi"}`+"\n"))
	const at = "@DB@"
	cases := [][]string{
		{"dump", at}, {"dump", "--json", at}, {"dump", "--json", "--raw", at}, {"dump", "--raw", at},
		{"dump", "--dot", at}, {"dump", "--json", "--session", "other", at}, {"dump", "--raw", "--session", "mig", at},
		{"stats", at}, {"stats", "--json", at},
		{"resume", "--db", at, "--session", "mig"}, {"resume", "--db", at, "--session", "mig", "--json"},
		{"resume", "--db", at, "--session", "mig", "--marker", "1", "--json"},
		{"resume", "--db", at, "--session", "other", "--marker", "latest"},
		{"resume", at, "--session", "mig", "--json"},
		{"sessions", at}, {"sessions", "--json", at},
		{"stats", "--session", "other", at}, {"stats", "--json", "--session", "mig", at},
		{"dump", "--json", "--session", "mig", "--from", "5", "--to", "9", at}, {"dump", "--session", "mig", "--from", "30", at},
	}
	args := func(c []string, db string) []string {
		out := make([]string, len(c))
		for i, a := range c {
			out[i] = strings.ReplaceAll(a, at, db)
		}
		return out
	}
	want := make([]string, len(cases))
	for i, c := range cases {
		want[i] = mustCLI(t, args(c, db)...)
	}
	url := liveAgent(t, db, debughttp.Options{})
	r := cli(t, "", "dump", db, "--timeout", "100ms")
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "another process holds the database") || !strings.Contains(r.stderr, "/debug/strata") {
		t.Errorf("a held file: stderr %q does not point at the handler", r.stderr)
	}
	for i, c := range cases {
		for _, u := range []string{url, url + "/"} {
			if got := mustCLI(t, args(c, u)...); got != want[i] {
				t.Errorf("strata %s: through the URL:\n%s", strings.Join(args(c, u), " "), firstDiff(got, want[i]))
			}
		}
	}
}

// backup and verify of a URL: the hot backup, whole, written atomically;
// it verifies and resumes to the same bytes.
func TestRemote_BackupVerify(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // not parallel: verify's temporary copy goes there
	db := replayed(t, []string{"--every", "2", "--summarizer", "lossy"}, incident(t))
	before := resume(t, db, "mig")
	url := liveAgent(t, db, debughttp.Options{})

	dest := filepath.Join(t.TempDir(), "copy.db")
	out := mustCLI(t, "backup", url, dest)
	size := int64(len(readBytes(t, dest)))
	if out != "backup "+dest+" bytes="+itoa(size)+" sessions=1\n" {
		t.Errorf("backup: %q (file %d bytes)", out, size)
	}
	if fi, err := os.Stat(dest); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("backup mode: %v %v", fi.Mode(), err)
	}
	if got := resume(t, dest, "mig"); got.SHA256 != before.SHA256 {
		t.Errorf("resume from the backup: sha256 %s, want %s", got.SHA256, before.SHA256)
	}
	if got := mustCLI(t, "verify", dest); got != "ok\n" {
		t.Errorf("verify of the backup: %q", got)
	}
	stdout := mustCLI(t, "backup", url, "-")
	if int64(len(stdout)) != size || stdout[:16] != string(readBytes(t, dest)[:16]) {
		t.Errorf("backup to stdout: %d bytes, want %d", len(stdout), size)
	}
	if got := mustCLI(t, "verify", url); got != "ok\n" {
		t.Errorf("verify URL: %q", got)
	}
	// verify's copy went to a temporary file, removed after.
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("verify URL left %v in TMPDIR", left)
	}
}

// Errors: the server's message and exit 1; a URL that is not a strata
// handler said so; a cut transfer never becomes DEST.
func TestRemote_Errors(t *testing.T) {
	t.Parallel()
	db := replayed(t, nil, incident(t))
	url := liveAgent(t, db, debughttp.Options{})
	for _, tc := range []struct {
		args []string
		says []string
	}{
		{[]string{"dump", "--session", "absent", url}, []string{"404 Not Found", "session not found"}},
		{[]string{"resume", "--db", url, "--session", "absent"}, []string{"404 Not Found", "session not found"}},
		{[]string{"resume", "--db", url, "--session", "mig", "--marker", "99"}, []string{"404 Not Found", "marker 99"}},
		{[]string{"stats", strings.TrimSuffix(url, debughttp.DefaultPrefix)}, []string{"is not a strata debug handler", "Hint: give the URL the handler is mounted at"}},
		{[]string{"dump", url + "/nope"}, []string{"404 Not Found", "no such endpoint"}},
	} {
		r := cli(t, "", tc.args...)
		wantCode(t, r, exitError, tc.args...)
		for _, s := range tc.says {
			if !strings.Contains(r.stderr, s) {
				t.Errorf("strata %s: stderr %q lacks %q", strings.Join(tc.args, " "), r.stderr, s)
			}
		}
	}

	// Servers that misbehave.
	mux := http.NewServeMux()
	mux.HandleFunc("/plain/", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "hello", http.StatusOK) })
	mux.HandleFunc("/cut/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(debughttp.HandlerHeader, debughttp.HandlerVersion)
		w.Header().Set("Content-Length", "100000")
		w.Write([]byte(strings.Repeat("x", 1000)))
	})
	mux.HandleFunc("/slow/", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/stall/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(debughttp.HandlerHeader, debughttp.HandlerVersion)
		w.Header().Set("Content-Length", "100000")
		w.Write([]byte(strings.Repeat("x", 1000)))
		w.(http.Flusher).Flush()
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dir := t.TempDir()
	dest := filepath.Join(dir, "copy.db")
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"dump", srv.URL + "/plain"}, "is not a strata debug handler (200 OK, without a Strata-Handler header)"},
		{[]string{"backup", srv.URL + "/cut", dest}, "/cut/backup: transfer cut after 1000 of 100000 bytes: unexpected EOF"},
		{[]string{"verify", srv.URL + "/cut"}, "transfer cut after 1000 of 100000 bytes"},
		{[]string{"stats", "--timeout", "200ms", srv.URL + "/slow"}, "no answer within 200ms"},
		{[]string{"backup", "--timeout", "200ms", srv.URL + "/stall", dest}, "the server sent nothing for 200ms"},
		{[]string{"dump", "http://127.0.0.1:1/debug/strata"}, "is the agent running"},
	} {
		start := time.Now()
		r := cli(t, "", tc.args...)
		wantCode(t, r, exitError, tc.args...)
		if !strings.Contains(r.stderr, tc.says) {
			t.Errorf("strata %s: stderr %q lacks %q", strings.Join(tc.args, " "), r.stderr, tc.says)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("strata %s: took %s", strings.Join(tc.args, " "), took)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("a failed backup left %v", left)
	}
}

// A handler with a token: refused without it (exit 1, a hint naming the
// variable), served with it.
func TestRemote_Token(t *testing.T) {
	db := replayed(t, nil, incident(t))
	url := liveAgent(t, db, debughttp.Options{Token: "s3cret"})
	t.Setenv(envToken, "")
	r := cli(t, "", "stats", url)
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "401 Unauthorized") || !strings.Contains(r.stderr, "Hint: set "+envToken) {
		t.Errorf("without the token: stderr %q", r.stderr)
	}
	t.Setenv(envToken, "wrong")
	r = cli(t, "", "stats", url)
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "Hint: the handler refused the token in "+envToken) {
		t.Errorf("with a wrong token: stderr %q", r.stderr)
	}
	t.Setenv(envToken, "s3cret")
	if out := mustCLI(t, "resume", "--db", url, "--session", "mig", "--json"); !strings.Contains(out, `"session": "mig"`) {
		t.Errorf("with the token: %s", out)
	}
}

// itoa formats n.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// slowWriter is a consumer that takes its time over every write: a pager,
// a slow disk.
type slowWriter struct {
	delay time.Duration
	n     int
}

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(w.delay)
	w.n += len(p)
	return len(p), nil
}

// --timeout bounds the silence of the server, not the time the output
// takes to be consumed: `strata dump URL | less`, read at a human pace,
// is not a stalled server.
func TestRemote_SlowConsumerIsNoStall(t *testing.T) {
	t.Parallel()
	const size = 128 << 10
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(debughttp.HandlerHeader, debughttp.HandlerVersion)
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Write([]byte(strings.Repeat("x", size)))
	}))
	defer srv.Close()
	// Each write (of 32 KiB at most) outlasts the timeout, the server never does.
	out := &slowWriter{delay: 250 * time.Millisecond}
	if err := newRemote(srv.URL, 100*time.Millisecond).copy(out, "dump", nil); err != nil {
		t.Fatalf("a slow consumer of a prompt server: %v", err)
	}
	if out.n != size {
		t.Errorf("copied %d bytes, want %d", out.n, size)
	}
}

// backup URL DEST shows its progress as a backup of a file does, towards
// the length the handler announced.
func TestRemote_BackupProgress(t *testing.T) {
	db := replayed(t, nil, incident(t))
	url := liveAgent(t, db, debughttp.Options{})
	t.Setenv(progressEnv, "1")
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = 0
	r := cli(t, "", "backup", url, filepath.Join(t.TempDir(), "copy.db"))
	wantCode(t, r, exitOK)
	draws := 0
	for _, d := range progressDraw.FindAllStringSubmatch(r.stderr, -1) {
		if d[1] == "" {
			continue
		}
		draws++
		if !wellFormed.MatchString(d[1]) || !strings.Contains(d[1], " of ") {
			t.Errorf("progress line %q: not well formed, or without the total", d[1])
		}
	}
	if draws == 0 || !strings.HasSuffix(r.stderr, "\r\x1b[K") {
		t.Errorf("backup URL: stderr %q: no progress, or not erased", r.stderr)
	}
}
