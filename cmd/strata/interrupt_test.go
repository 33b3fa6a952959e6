package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/strata-go/strata/store"
)

// A contextReader gives r's bytes unchanged, whatever the sizes of the
// reads, and its error after them.
func TestContextReader_PassesBytes(t *testing.T) {
	data := strings.Repeat("0123456789abcdef", 20000)
	r := newContextReader(context.Background(), iotest.HalfReader(strings.NewReader(data)))
	var got bytes.Buffer
	buf := make([]byte, 1000)
	for {
		n, err := r.Read(buf[:1+got.Len()%len(buf)])
		got.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if got.String() != data {
		t.Fatalf("read %d bytes, want the %d written", got.Len(), len(data))
	}
}

// A Read blocked on a pipe that nobody writes to returns ctx's error when
// ctx ends.
func TestContextReader_BlockedReadEndsWithContext(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	r := newContextReader(ctx, pr)
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 10))
		done <- err
	}()
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Read: %v, want context.Canceled", err)
	}
}

// interruptingReader gives data, then, on the next read, ends ctx as
// SIGINT does and blocks like a terminal that nobody types at.
type interruptingReader struct {
	data   *strings.Reader
	cancel context.CancelCauseFunc
	block  chan struct{}
}

// Read implements io.Reader.
func (r *interruptingReader) Read(p []byte) (int, error) {
	if r.data.Len() > 0 {
		return r.data.Read(p)
	}
	r.cancel(&interruptError{sig: syscall.SIGINT})
	<-r.block
	return 0, io.EOF
}

// headOf returns the head seq of session in the database at path.
func headOf(t testing.TB, path, session string) uint64 {
	t.Helper()
	db, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	info, err := db.Info(session)
	if err != nil {
		t.Fatal(err)
	}
	return info.Head
}

// Ctrl-C while replay waits on stdin: what was read is stored, the closing
// line says how much, and the exit status is 130.
func TestInterrupt_ReplayStdin(t *testing.T) {
	data, err := os.ReadFile(incident(t))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(strings.TrimSpace(string(data)), "\n") + 1
	path := filepath.Join(t.TempDir(), "x.db")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	in := &interruptingReader{data: strings.NewReader(string(data)), cancel: cancel, block: make(chan struct{})}
	defer close(in.block)
	var out, errOut bytes.Buffer
	code := runContext(ctx, []string{"replay", "--db", path, "-"}, in, &out, &errOut)
	if code != 130 {
		t.Fatalf("exit %d, want 130\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "strata: interrupted by SIGINT") || strings.Contains(errOut.String(), "context canceled") {
		t.Errorf("stderr:\n%s", errOut.String())
	}
	want := fmt.Sprintf("replayed files=1 events=%d sessions=1 ", lines)
	if !strings.Contains(out.String(), want) {
		t.Errorf("stdout:\n%s\nwant a line with %q", out.String(), want)
	}
	if head := headOf(t, path, "mig"); head != uint64(lines) {
		t.Errorf("head %d, want the %d events read", head, lines)
	}
}

// A real SIGINT to a replay that is reading a pipe: exit 130, and the
// closing line counts exactly the events the database holds.
func TestInterrupt_ReplaySignal(t *testing.T) {
	data, err := os.ReadFile(incident(t))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "x.db")
	c := startChild(t, envMain+"=1", "replay", "--db", path, "--every", "0", "--every-events", "5", "-")
	defer c.stdin.Close()
	if _, err := c.stdin.Write(data); err != nil {
		t.Fatal(err)
	}
	// A compaction line means the events are being stored, so the signal
	// handler, installed before the command runs, is in place.
	rd := bufio.NewReader(c.stdout)
	first, err := rd.ReadString('\n')
	if err != nil || !strings.HasPrefix(first, "compacted ") {
		t.Fatalf("first line %q, %v; stderr: %s", first, err, c.stderr.String())
	}
	if err := c.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(rd)
	err = c.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("wait: %v, want exit 130\nstdout:\n%s%s\nstderr:\n%s", err, first, rest, c.stderr.String())
	}
	m := regexp.MustCompile(`replayed files=1 events=(\d+) `).FindSubmatch(rest)
	if m == nil {
		t.Fatalf("no closing line in\n%s%s", first, rest)
	}
	n, _ := strconv.ParseUint(string(m[1]), 10, 64)
	if head := headOf(t, path, "mig"); head != n {
		t.Errorf("the closing line says events=%d, the database holds %d", n, head)
	}
	if r := cli(t, "", "verify", path); r.code != exitOK {
		t.Errorf("verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
