//go:build unix

package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Cluster is a PostgreSQL server of one test's own: its data directory, a
// free port on 127.0.0.1, trust authentication.
type Cluster struct {
	// URL is the server's postgres database, as the postgres user.
	URL string

	bin, dir string
	cred     *syscall.Credential // the postgres user's, when the test runs as root
}

// StartCluster makes and starts a server of t's own with the programs of
// BinEnv's directory (skipping t when it is unset), stopped and removed
// when t ends. As root it runs them as the postgres user, since initdb
// refuses root.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := os.Getenv(BinEnv)
	if bin == "" {
		t.Skipf("%s is unset: the tests that restart a PostgreSQL server of their own are skipped (docs/postgres.md says how to run them)", BinEnv)
	}
	c := &Cluster{bin: bin}
	dir, err := os.MkdirTemp("", "strata-pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("pgtest: running as root, initdb needs the postgres user: %v", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, int(uid), int(gid)); err != nil {
			t.Fatal(err)
		}
	}
	c.run(t, "initdb", "-D", c.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync")
	for attempt := 1; ; attempt++ {
		port := freePort(t)
		err := c.pgctl("start", "-o", fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s", port, dir))
		if err == nil {
			c.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
			break
		}
		if attempt == 3 { // the port taken meanwhile, each time
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if err := c.pgctl("stop", "-m", "fast"); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return c
}

// Restart restarts the server with pg_ctl restart -m fast: the server
// ends every connection, shuts down and starts again, and accepts
// connections when Restart returns. It may run on any goroutine.
func (c *Cluster) Restart() error { return c.pgctl("restart", "-m", "fast") }

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// pgctl runs pg_ctl with args, waiting for it to finish (-w).
func (c *Cluster) pgctl(args ...string) error {
	args = append([]string{args[0], "-D", c.data(), "-l", filepath.Join(c.dir, "log"), "-w", "-t", "120"}, args[1:]...)
	out, err := c.command("pg_ctl", args...).CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
		return fmt.Errorf("pgtest: pg_ctl %v: %v\n%s\nserver log:\n%s", args, err, out, log)
	}
	return nil
}

// run runs one of the server's programs, failing t on an error.
func (c *Cluster) run(t testing.TB, prog string, args ...string) {
	t.Helper()
	if out, err := c.command(prog, args...).CombinedOutput(); err != nil {
		t.Fatalf("pgtest: %s %v: %v\n%s", prog, args, err, out)
	}
}

func (c *Cluster) command(prog string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(c.bin, prog), args...)
	cmd.Dir = c.dir
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd
}

// freePort returns a port of 127.0.0.1 that nothing listened on a moment
// ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
