package realclient_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// client returns the path of a real client: the environment variable env,
// which .ci/run sets to the pinned version it installed from npm. The test
// skips without it, and under -short.
func client(t *testing.T, env string) string {
	t.Helper()
	p := os.Getenv(env)
	switch {
	case p == "":
		t.Skipf("%s is not set: .ci/run sets it to the client it installs from npm (docs/realclients.md)", env)
	case testing.Short():
		t.Skip("-short: a real client takes tens of seconds")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s=%s: %v", env, p, err)
	}
	return p
}

// buildStrata builds the strata binary into a directory of its own and
// returns that directory, for the hooks' PATH.
func buildStrata(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "strata"), "./cmd/strata")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// run runs a client's command with env, in dir, within timeout, and
// returns its stdout; a non-zero exit fails the test with its output.
func run(t *testing.T, dir string, env []string, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	stdout, _ := runOut(t, dir, env, timeout, name, args...)
	return stdout
}

// runOut is run returning stderr too.
func runOut(t *testing.T, dir string, env []string, timeout time.Duration, name string, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s %q: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(name), args, err, stdout.String(), stderr.String())
		}
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s %q: still running after %s\nstdout:\n%s\nstderr:\n%s", filepath.Base(name), args, timeout, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String()
}

// baseEnv is an environment of the test's own: HOME and the temporary
// directory under root, PATH with bin first, nothing of the user's
// configuration.
func baseEnv(t *testing.T, root, bin string) []string {
	home := filepath.Join(root, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	path := bin + string(os.PathListSeparator) + os.Getenv("PATH")
	return []string{"HOME=" + home, "PATH=" + path, "TMPDIR=" + os.TempDir(), "LANG=C.UTF-8", "TERM=dumb", "NO_COLOR=1"}
}

// readAgainAddsNothing stores the session s read from raw (the file at
// path, in format f) and reads raw again against that store: every record
// is known by its ref, so no event comes out.
func readAgainAddsNothing(t *testing.T, f transcript.Format, path string, raw []byte, s transcript.Session) {
	t.Helper()
	db := dbtest.Open(t, store.Options{})
	if _, err := db.Append(s.ID, s.Events...); err != nil {
		t.Fatal(err)
	}
	again, _, err := transcript.Read(f, bytes.NewReader(raw), transcript.Options{File: path, Target: func(conv string) (transcript.Target, error) {
		return transcript.Target{Session: conv, Stored: func(ref string) (ok bool, err error) {
			err = db.View(func(s *store.Snapshot) (err error) { _, ok, err = s.Ref(conv, ref); return err })
			return ok, err
		}}, nil
	}})
	if err != nil || len(again) != 1 || len(again[0].Events) != 0 {
		t.Errorf("%s read again against the store: %v, %d sessions, want no event", path, err, len(again))
	}
}

// readEvents is what a test reads of a session's events: the user's
// words, the tool calls, the ids of the failed results, the artifacts'
// keys and the system events' texts, in order.
type readEvents struct {
	users, failed, artifacts, systems []string
	calls                             int
}

// classify sorts events by kind into a readEvents.
func classify(events []tier.Event) readEvents {
	var r readEvents
	for _, e := range events {
		switch {
		case e.Kind == tier.KindUser:
			r.users = append(r.users, e.Text)
		case e.Kind == tier.KindToolCall:
			r.calls++
		case e.Kind == tier.KindToolResult && e.Failed:
			r.failed = append(r.failed, e.ID)
		case e.Kind == tier.KindArtifact:
			r.artifacts = append(r.artifacts, e.Key)
		case e.Kind == tier.KindSystem:
			r.systems = append(r.systems, e.Text)
		}
	}
	return r
}
