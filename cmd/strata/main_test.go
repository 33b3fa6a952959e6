package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-go/strata/store"
)

// Environment variables through which the test binary, re-executed, plays
// another part: the strata command (what verify's re-exec needs), or a
// process holding a database open for writing.
const (
	envMain  = "STRATA_TEST_MAIN"         // "1": run the CLI with os.Args[1:]
	envHold  = "STRATA_TEST_HOLD"         // a path: open it for writing and block
	envCrash = "STRATA_TEST_VERIFY_CRASH" // kill, panic or garbage: how verify's child misbehaves
)

func TestMain(m *testing.M) {
	if path := os.Getenv(envHold); path != "" {
		holdDatabase(path)
		return
	}
	// A fuzzing worker is this binary too, with the coordinator's
	// environment: it fuzzes.
	fuzzWorker := slices.ContainsFunc(os.Args[1:], func(a string) bool { return strings.HasPrefix(a, "-test.fuzzworker") })
	if os.Getenv(envMain) == "1" && !fuzzWorker {
		if len(os.Args) > 2 && os.Args[1] == "verify" && os.Args[2] == "--in-process" {
			crashVerifyChild(os.Getenv(envCrash))
		}
		os.Exit(runMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	// verify re-executes os.Executable(), this test binary: make it the CLI.
	os.Setenv(envMain, "1")
	// A race-enabled child sleeps a second at exit, waiting for reports.
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	// The commands read ~/.claude/settings.json (claude-code install and
	// status): the tests see an empty home of their own, not the machine's.
	home, err := os.MkdirTemp("", "strata-test-home-")
	if err != nil {
		panic(err)
	}
	os.Setenv("HOME", home)
	code := m.Run()
	_ = os.RemoveAll(home)
	os.Exit(code)
}

// holdDatabase opens path for writing, says "ready" and holds it until
// stdin closes or the process is killed.
func holdDatabase(path string) {
	db, err := store.Open(path, store.Options{})
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	os.Stdout.WriteString("ready\n")
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = db.Close()
	os.Exit(0)
}

// crashVerifyChild makes verify's child die or misbehave the way a damaged
// file can make it.
func crashVerifyChild(how string) {
	switch how {
	case "kill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Minute)
	case "panic":
		panic("verify child: injected panic")
	case "garbage":
		os.Stdout.WriteString("this is not the protocol\n")
		os.Exit(0)
	}
}

// result is what one run of the CLI gave.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs the strata command line in this process.
func cli(t testing.TB, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// mustCLI runs the CLI and fails t unless it exits 0.
func mustCLI(t testing.TB, args ...string) string {
	t.Helper()
	r := cli(t, "", args...)
	if r.code != exitOK {
		t.Fatalf("strata %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// wantCode fails t unless r exited with code.
func wantCode(t testing.TB, r result, code int, args ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("strata %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
}

// incident is the seed's migration incident fixture.
func incident(t testing.TB) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "testdata", "incident", "migration.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tempDB returns a path for a new database in a fresh temporary directory.
func tempDB(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "strata.db")
}

// replayed replays files into a new database with the given flags and
// returns its path.
func replayed(t testing.TB, flags []string, files ...string) string {
	t.Helper()
	db := tempDB(t)
	mustCLI(t, append(append([]string{"replay", "--db", db}, flags...), files...)...)
	return db
}

// writeFile writes content to name in a temporary directory.
func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// readBytes returns the bytes of the file at path.
func readBytes(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// resumeJSON is the part of `resume --json` the tests read.
type resumeJSON struct {
	Session    string  `json:"session"`
	Source     string  `json:"source"`
	Marker     *uint64 `json:"marker"`
	Checkpoint *uint64 `json:"checkpoint"`
	Reason     string  `json:"reason"`
	SHA256     string  `json:"sha256"`
	Context    string  `json:"context"`
}

// resume runs `resume --json` and decodes it.
func resume(t testing.TB, db, session string, extra ...string) resumeJSON {
	t.Helper()
	out := mustCLI(t, append([]string{"resume", "--db", db, "--session", session, "--json"}, extra...)...)
	var r resumeJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("resume --json: %v\n%s", err, out)
	}
	return r
}

// child is this test binary run as a child process, with a pipe to its
// stdin, one from its stdout, and its stderr kept.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr bytes.Buffer
}

// startChild starts this test binary with args and env (NAME=value) added
// to its environment. The caller ends it.
func startChild(t testing.TB, env string, args ...string) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: exec.Command(exe, args...)}
	c.cmd.Env = append(os.Environ(), env)
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if c.stdout, err = c.cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	c.cmd.Stderr = &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// holdForWriting starts a child process that holds db open for writing and
// returns its pid once it does; the child is killed at the end of the test.
func holdForWriting(t testing.TB, db string) int {
	t.Helper()
	c := startChild(t, envHold+"="+db)
	t.Cleanup(func() {
		_ = c.stdin.Close()
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
	})
	line, err := bufio.NewReader(c.stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("holding process: %q, %v; stderr: %s", line, err, c.stderr.String())
	}
	return c.cmd.Process.Pid
}

// sessionsOf lists the sessions of a database.
func sessionsOf(t testing.TB, db string) []string {
	t.Helper()
	d, err := store.Open(db, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ids, err := d.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// jsonString returns s as a JSON string, <, > and & left alone, as the
// settings editor writes strings.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
