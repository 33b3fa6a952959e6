package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of testdata/ from the output")

// The picture of the seed's incident replayed as `strata demo` replays it
// (the default policy; the lossy and the extractive summarizer) is
// the golden file, byte for byte: the output is deterministic.
func TestDump_DotGolden(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	mustCLI(t, "demo", "--db", db)
	got := mustCLI(t, "dump", "--dot", db)
	golden := filepath.Join("testdata", "incident.dot")
	if *updateGolden {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := string(readBytes(t, golden))
	if got != want {
		t.Errorf("dump --dot differs from %s (go test -run TestDump_DotGolden -update rewrites it):\n%s", golden, firstDiff(got, want))
	}
	if again := mustCLI(t, "dump", "--dot", db); again != got {
		t.Errorf("two pictures of one database differ")
	}
	one := mustCLI(t, "dump", "--dot", "--session", "incident-lossy", db)
	if strings.Contains(one, "incident-extractive") || !strings.Contains(one, `label="session incident-lossy\n`) {
		t.Errorf("dump --dot --session incident-lossy:\n%s", one)
	}
	// Graphviz renders it, when installed: an extra check.
	if dot, err := exec.LookPath("dot"); err == nil {
		cmd := exec.Command(dot, "-Tsvg", golden)
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "<svg") {
			t.Errorf("dot -Tsvg %s: %v\n%.400s", golden, err, out)
		}
	}
}

func TestDump_DotUsage(t *testing.T) {
	t.Parallel()
	db := replayed(t, nil, incident(t))
	for _, args := range [][]string{
		{"dump", "--dot", "--json", db},
		{"dump", "--dot", "--raw", db},
	} {
		wantCode(t, cli(t, "", args...), exitUsage, args...)
	}
}
