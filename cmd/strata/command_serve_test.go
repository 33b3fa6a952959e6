package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-go/strata/debughttp"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// served is a `strata serve` child process.
type served struct {
	cmd  *exec.Cmd
	base string // the handler's URL: http://127.0.0.1:PORT/debug/strata

	mu     sync.Mutex
	stderr bytes.Buffer
	eof    chan struct{} // closed when stderr ends
}

// startServe runs `strata serve --addr 127.0.0.1:0 args...` in a child
// process (this test binary as the CLI) and returns once it says where it
// listens. env is added to the child's environment. A child that exits
// first has failed to start: startServe returns it with base empty.
func startServe(t *testing.T, env []string, args ...string) *served {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := &served{eof: make(chan struct{})}
	s.cmd = exec.Command(exe, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	s.cmd.Env = append(os.Environ(), env...)
	pipe, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.eof
		_ = s.cmd.Wait()
	})
	first := make(chan string, 1)
	go func() {
		defer close(s.eof)
		sc := bufio.NewScanner(pipe)
		for n := 0; sc.Scan(); n++ {
			s.mu.Lock()
			s.stderr.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if n == 0 {
				first <- sc.Text()
			}
		}
		close(first)
	}()
	var line string
	select {
	case line = <-first:
	case <-time.After(time.Minute): // a bound on a hang, not a measure of speed
		t.Fatal("strata serve said nothing for a minute")
	}
	if m := regexp.MustCompile(`open (http://127\.0\.0\.1:\d+/debug/strata)/ui/ \(Ctrl-C stops\)$`).FindStringSubmatch(line); m != nil {
		s.base = m[1]
	}
	return s
}

// stop interrupts the child as Ctrl-C does and returns its exit code and
// stderr.
func (s *served) stop(t *testing.T) (int, string) {
	t.Helper()
	if err := s.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	return s.wait(t)
}

// wait waits for the child to exit and returns its exit code and stderr.
func (s *served) wait(t *testing.T) (int, string) {
	t.Helper()
	<-s.eof
	err := s.cmd.Wait()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return code, s.stderr.String()
}

// fetch GETs url and returns the status and the body, or the error that
// cut it.
func fetch(t *testing.T, url string, header ...string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// strata serve answers the page and the JSON endpoints of a file, reading
// only: the reading commands take its URL and print what they print from
// the file. It holds the file's lock only while it answers: between
// requests a writer opens the file, a request meanwhile gets 503 naming
// the lock, and the next one shows what the writer stored. Ctrl-C stops it
// with exit 130.
func TestServe(t *testing.T) {
	t.Parallel()
	db := replayed(t, []string{"--every", "2", "--summarizer", "lossy", "--drop", "artifacts"}, incident(t))
	before := readBytes(t, db)
	s := startServe(t, nil, "--timeout", "50ms", db)
	if s.base == "" {
		code, stderr := s.wait(t)
		t.Fatalf("strata serve did not start: exit %d\n%s", code, stderr)
	}

	if code, body, err := fetch(t, s.base+debughttp.PagePath); err != nil || code != 200 || !strings.Contains(body, "<title>strata</title>") {
		t.Errorf("the page: %d %v\n%.200s", code, err, body)
	}
	code, body, err := fetch(t, s.base+"/session?session=mig")
	if err != nil || code != 200 || !strings.Contains(body, `"item": "migrations/003_down.sql"`) {
		t.Errorf("the session: %d %v\n%s", code, err, body)
	}
	for _, args := range [][]string{{"dump", "--json"}, {"stats"}} {
		fromFile := mustCLI(t, append(args, db)...)
		if got := mustCLI(t, append(args, s.base)...); got != fromFile {
			t.Errorf("strata %s URL differs from the file's:\n%s\nwant\n%s", strings.Join(args, " "), got, fromFile)
		}
	}
	if !bytes.Equal(readBytes(t, db), before) {
		t.Error("serving changed the file")
	}

	w, err := store.Open(db, store.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatalf("opening the served file for writing between requests: %v", err)
	}
	if code, body, err := fetch(t, s.base+"/stats"); err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "another process") {
		t.Errorf("a request while a writer holds the file: %d %v\n%s", code, err, body)
	}
	info, err := w.Append("mig", tier.Event{Kind: tier.KindUser, Text: "one more"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if code, body, err := fetch(t, s.base+"/"); err != nil || code != 200 || !strings.Contains(body, fmt.Sprintf(`"head_seq": %d`, info.Last)) {
		t.Errorf("the index after the writer closed: %d %v, want head_seq %d\n%s", code, err, info.Last, body)
	}

	exit, stderr := s.stop(t)
	if exit != 130 || !strings.HasPrefix(stderr, "serving "+db+" read-only: open "+s.base+"/ui/") || !strings.HasSuffix(stderr, "serve: stopped\nstrata: interrupted by SIGINT\n") {
		t.Errorf("after Ctrl-C: exit %d, stderr:\n%s", exit, stderr)
	}
}

// With STRATA_DEBUG_TOKEN set, data needs the token; the page does not.
func TestServe_Token(t *testing.T) {
	t.Parallel()
	db := replayed(t, []string{"--every", "2"}, incident(t))
	s := startServe(t, []string{envToken + "=s3cret"}, db)
	if s.base == "" {
		code, stderr := s.wait(t)
		t.Fatalf("strata serve did not start: exit %d\n%s", code, stderr)
	}
	if code, _, err := fetch(t, s.base+debughttp.PagePath); err != nil || code != 200 {
		t.Errorf("the page without the token: %d %v", code, err)
	}
	if code, body, _ := fetch(t, s.base+"/session?session=mig"); code != 401 || strings.Contains(body, "mig") {
		t.Errorf("the session without the token: %d %s", code, body)
	}
	if code, _, _ := fetch(t, s.base+"/session?session=mig", "Authorization", "Bearer s3cret"); code != 200 {
		t.Errorf("the session with the token: %d", code)
	}
	if exit, stderr := s.stop(t); exit != 130 || !strings.Contains(stderr, "requests must carry the token of "+envToken) || strings.Contains(stderr, "s3cret") {
		t.Errorf("exit %d, stderr:\n%s", exit, stderr)
	}
}

// A damaged record gets an error answer, and the server goes on serving
// the rest.
func TestServe_Damaged(t *testing.T) {
	t.Parallel()
	db, damage := damagedDB(t)
	damage()
	s := startServe(t, nil, db)
	if s.base == "" {
		code, stderr := s.wait(t)
		t.Fatalf("strata serve did not start: exit %d\n%s", code, stderr)
	}
	code, body, err := fetch(t, s.base+"/session?session=b-damaged")
	var e struct {
		Error string `json:"error"`
	}
	if err != nil || code != 500 || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error, `store: database is damaged: session "b-damaged"`) {
		t.Errorf("the damaged session: %d %v %s", code, err, body)
	}
	if code, _, err := fetch(t, s.base+"/dump?session=b-damaged"); err == nil && code == 200 {
		t.Errorf("the damaged session's dump came whole")
	}
	for _, path := range []string{"/session?session=a-intact", "/dump?session=a-intact", "/", debughttp.PagePath} {
		if code, body, err := fetch(t, s.base+path); err != nil || code != 200 {
			t.Errorf("%s after the damaged answers: %d %v %.200s", path, code, err, body)
		}
	}
	if exit, stderr := s.stop(t); exit != 130 {
		t.Errorf("exit %d, stderr:\n%s", exit, stderr)
	}
}

// A file with garbage written over part of it: serve either refuses to
// open it (exit 1, an error) or answers every request — 200, an error, or
// a cut body — and still serves its page afterwards; it never crashes.
func TestServe_Garbage(t *testing.T) {
	t.Parallel()
	good := readBytes(t, replayed(t, []string{"--every", "2", "--fold", "2"}, incident(t)))
	opened, failed := 0, 0 // servers started; answers that were an error or cut
	for _, at := range []int{0, 4096, 8192, 12288, len(good) / 2, len(good) - 8192} {
		raw := bytes.Clone(good)
		for i := at; i < at+512 && i < len(raw); i++ {
			raw[i] = byte(i*131 + 7)
		}
		path := tempDB(t)
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		s := startServe(t, nil, path)
		if s.base == "" {
			code, stderr := s.wait(t)
			t.Logf("garbage at %d: %s", at, strings.TrimSpace(stderr))
			if code != exitError || !strings.HasPrefix(stderr, "Error: ") || strings.Contains(stderr, "panic") {
				t.Errorf("garbage at %d: serve did not start: exit %d\n%s", at, code, stderr)
			}
			continue
		}
		paths := []string{"/", "/stats", "/dump?raw=1", "/dump?format=dot", "/backup"}
		for _, id := range []string{"mig", "absent"} {
			paths = append(paths, "/session?session="+id, "/resume?session="+id, "/dump?format=text&session="+id)
		}
		for _, p := range paths {
			code, body, err := fetch(t, s.base+p)
			if err != nil || code != 200 && !strings.Contains(p, "absent") {
				failed++
			}
			if err == nil && code != 200 && !strings.HasPrefix(body, `{"error":`) {
				t.Errorf("garbage at %d: %s: %d without a JSON error: %.200s", at, p, code, body)
			}
		}
		if code, _, err := fetch(t, s.base+debughttp.PagePath); err != nil || code != 200 {
			t.Errorf("garbage at %d: the page afterwards: %d %v", at, code, err)
		}
		if exit, stderr := s.stop(t); exit != 130 || strings.Contains(stderr, "goroutine ") {
			t.Errorf("garbage at %d: exit %d, stderr:\n%s", at, exit, stderr)
		}
		opened++
	}
	t.Logf("%d damaged files served, %d answers an error or cut", opened, failed)
	if opened == 0 || failed == 0 {
		t.Errorf("the garbage reached no answer: %d files served, %d answers failed", opened, failed)
	}
}

func TestServe_Usage(t *testing.T) {
	t.Parallel()
	db := replayed(t, nil, incident(t))
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"serve", "http://127.0.0.1:6060/debug/strata"}, exitUsage, "Hint: a running agent serves its own page: open http://127.0.0.1:6060/debug/strata/ui/"},
		{[]string{"serve", "http://127.0.0.1:6060/debug/strata"}, exitUsage, "Error: serve takes a database file or a postgres:// URL, not a debug handler's URL: http://127.0.0.1:6060/debug/strata\n"},
		{[]string{"serve", "--addr", "6060", db}, exitUsage, `--addr "6060": `},
		{[]string{"serve", "--addr", "127.0.0.1:99999", db}, exitUsage, `--addr "127.0.0.1:99999": address 99999: invalid port`},
		{[]string{"serve", "--timeout", "0s", db}, exitUsage, "--timeout must be positive"},
		{[]string{"serve"}, exitUsage, "serve takes 1 argument (DB), got 0"},
		{[]string{"serve", "--addr", "0.0.0.0:0", db}, exitUsage, "Error: --addr 0.0.0.0:0 is not a loopback address\nHint: serve on 127.0.0.1 or [::1], or set STRATA_DEBUG_TOKEN"},
		{[]string{"serve", db + ".absent"}, exitError, "Error: "},
	} {
		r := cli(t, "", tc.args...)
		wantCode(t, r, tc.code, tc.args...)
		if !strings.Contains(r.stderr, tc.says) {
			t.Errorf("strata %s: stderr does not say %q:\n%s", strings.Join(tc.args, " "), tc.says, r.stderr)
		}
	}
	if out := mustCLI(t, "serve", "--help"); !strings.Contains(out, "/debug/strata/ui/") || !strings.Contains(out, "--addr") {
		t.Errorf("serve --help:\n%s", out)
	}
}
