package postgres_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/internal/pgtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/store/storetest"
	"github.com/strata-go/strata/tier"
)

// The test binary as an appending process (TestProcesses_AppendOneSession):
// envAppend holds "URL\tSESSION\tTAG\tN".
const envAppend = "STRATA_TEST_PG_APPEND"

func TestMain(m *testing.M) {
	if v := os.Getenv(envFleet); v != "" {
		os.Exit(fleetProcess(v))
	}
	if v := os.Getenv(envAppend); v != "" {
		os.Exit(appendProcess(v))
	}
	os.Exit(m.Run())
}

// appendProcess appends N single events tagged TAG to SESSION, printing
// each append's seq.
func appendProcess(v string) int {
	f := strings.Split(v, "\t")
	n, _ := strconv.Atoi(f[3])
	db, err := store.Open(f[0], store.Options{Create: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer db.Close()
	for i := range n {
		res, err := db.Append(f[1], tier.Event{Kind: tier.KindAssistant, Text: fmt.Sprintf("%s %d", f[2], i)})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(res.First)
	}
	return 0
}

// Processes append to one session at once: each append lands once, at the
// seq it was told, each process's in its order, and the seqs are gapless.
func TestProcesses_AppendOneSession(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts child processes")
	}
	url := pgtest.URL(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const procs, each = 3, 30
	type child struct {
		cmd *exec.Cmd
		out *bufio.Scanner
	}
	children := make([]child, procs)
	for p := range children {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), envAppend+"="+strings.Join([]string{url, "s", fmt.Sprint("p", p), fmt.Sprint(each)}, "\t"))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children[p] = child{cmd, bufio.NewScanner(stdout)}
	}
	told := map[uint64]string{} // seq → the event appended there
	for p, c := range children {
		var last uint64
		i := 0
		for c.out.Scan() {
			seq, err := strconv.ParseUint(c.out.Text(), 10, 64)
			if err != nil || seq <= last {
				t.Fatalf("process %d: append %d at %q, after %d", p, i, c.out.Text(), last)
			}
			told[seq], last = fmt.Sprintf("p%d %d", p, i), seq
			i++
		}
		if err := c.cmd.Wait(); err != nil || i != each {
			t.Fatalf("process %d: %v after %d appends", p, err, i)
		}
	}
	db := openDB(t, url, store.Options{})
	got := storetest.Events(t, db, "s")
	if len(got) != procs*each {
		t.Fatalf("%d events, want %d", len(got), procs*each)
	}
	for i, e := range got {
		if e.Seq != uint64(i+1) || told[e.Seq] != e.Text {
			t.Fatalf("seq %d (event %d) holds %q; its process was told %q", e.Seq, i, e.Text, told[e.Seq])
		}
	}
	dbtest.Verify(t, db)
}
