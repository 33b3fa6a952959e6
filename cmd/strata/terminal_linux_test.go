package main

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY returns both ends of a new pseudo-terminal: the controller, and
// the terminal a program writes to.
func openPTY(t *testing.T) (controller, terminal *os.File) {
	t.Helper()
	c, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if err := unix.IoctlSetPointerInt(int(c.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(c.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return c, tty
}

// backup DB - refuses to write the binary copy to a terminal: bad usage,
// with a hint, and not a byte on the screen.
func TestBackup_StdoutTerminal(t *testing.T) {
	t.Parallel()
	src := replayed(t, nil, incident(t))
	_, tty := openPTY(t)
	if !isTerminal(tty) {
		t.Fatal("a pseudo-terminal is not taken for a terminal")
	}
	var stderr strings.Builder
	code := run([]string{"backup", src, "-"}, strings.NewReader(""), tty, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "which is a terminal\nHint: redirect stdout to a file") {
		t.Errorf("backup DB - to a terminal: exit %d, stderr %q", code, stderr.String())
	}
	// Nothing was written to the terminal: its output queue is empty.
	if n, err := unix.IoctlGetInt(int(tty.Fd()), unix.TIOCOUTQ); err != nil || n != 0 {
		t.Errorf("%d bytes queued on the terminal (%v)", n, err)
	}
	f, err := os.Create(tempDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Error("a file is taken for a terminal")
	}
}
