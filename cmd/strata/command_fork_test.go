package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestFork_CLI forks the demo's compacted session, forks the fork, and
// checks what sessions, resume, dump and prune say of them; prune
// archives and vacuum shrinks.
func TestFork_CLI(t *testing.T) {
	db := tempDB(t)
	mustCLI(t, "demo", db)
	const src = "incident-extractive"
	if out := mustCLI(t, "fork", db, "--session", src, "--to", "f1"); !strings.HasPrefix(out, "forked f1 from "+src+" at marker ") {
		t.Fatalf("fork: %q", out)
	}
	mustCLI(t, "fork", db, "--session", "f1", "--to", "g", "--json")
	r := cli(t, "", "fork", db, "--session", src, "--marker", "1", "--to", "bad")
	wantCode(t, r, exitError, "fork at an invalidated marker")
	if !strings.Contains(r.stderr, `no valid marker to fork at: session "`+src+`" marker 1: marker 1 invalid`) || !strings.Contains(r.stderr, "--fallback") {
		t.Fatalf("fork at an invalidated marker: %s", r.stderr)
	}
	// Asked, the fork is at the checkpoint resume falls back to, and
	// resumes to its bytes.
	if out := mustCLI(t, "fork", db, "--session", src, "--marker", "1", "--fallback", "--to", "fb"); !strings.HasPrefix(out, "forked fb from "+src+" at checkpoint ") || !strings.Contains(out, "(marker 1 not valid)") {
		t.Fatalf("fork --fallback: %q", out)
	}
	fallback := strings.Replace(mustCLI(t, "resume", db, "--session", src, "--marker", "1"), "session: "+src+"\n", "session: fb\n", 1)
	if got := mustCLI(t, "resume", db, "--session", "fb"); got != fallback || !strings.Contains(got, "source: checkpoint ") {
		t.Fatalf("the fork at the fallback resumes to\n%s\nwant\n%s", got, fallback)
	}
	mustCLI(t, "prune", db, "--session", "fb")

	want := strings.Replace(mustCLI(t, "resume", db, "--session", src), "session: "+src+"\n", "session: g\n", 1)
	if got := mustCLI(t, "resume", db, "--session", "g"); got != want {
		t.Fatalf("the fork of a fork resumes to\n%s\nwant\n%s", got, want)
	}
	var ctx struct {
		Fork struct {
			Parent string `json:"parent"`
			At     uint64 `json:"fork_seq"`
		} `json:"fork"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "resume", db, "--session", "g", "--json")), &ctx); err != nil || ctx.Fork.Parent != "f1" || ctx.Fork.At == 0 {
		t.Fatalf("resume --json of a fork: %+v %v", ctx, err)
	}
	var lines []sessionLine
	if err := json.Unmarshal([]byte(mustCLI(t, "sessions", db, "--json")), &lines); err != nil {
		t.Fatal(err)
	}
	forks := 0
	for _, l := range lines {
		if l.Fork != nil {
			forks++
		}
	}
	if forks != 2 {
		t.Fatalf("sessions --json shows %d forks, want 2", forks)
	}
	if out := mustCLI(t, "sessions", db); !strings.Contains(out, "FORK OF") || !strings.Contains(out, "f1@seq ") {
		t.Fatalf("sessions:\n%s", out)
	}
	if out := mustCLI(t, "dump", db, "--session", "g"); !strings.Contains(out, "fork of f1 at seq ") {
		t.Fatalf("dump of a fork:\n%s", out)
	}
	if out := mustCLI(t, "dump", "--dot", db); strings.Count(out, "color=blue, label=\"fork at seq") != 2 {
		t.Fatalf("dump --dot draws no tree of forks:\n%s", out)
	}

	// A copy of the fork of a fork takes its ancestors along, saying so.
	copied := filepath.Join(t.TempDir(), "copy.db")
	out := mustCLI(t, "copy", "--session", "g", db, copied)
	if !strings.Contains(out, "ancestor session=f1\n") || !strings.Contains(out, "ancestor session="+src+"\n") {
		t.Fatalf("copy of a fork names no ancestors:\n%s", out)
	}
	mustCLI(t, "verify", copied)
	if got := mustCLI(t, "resume", copied, "--session", "g"); got != want {
		t.Fatal("the copied fork resumes to other bytes")
	}

	r = cli(t, "", "prune", db, "--session", "f1")
	wantCode(t, r, exitError, "prune of a held session")
	if !strings.Contains(r.stderr, `"f1" is held by its forks g`) {
		t.Fatalf("prune of a held session: %s", r.stderr)
	}
	if out := mustCLI(t, "prune", db, "--keep-last", "1", "--dry-run"); !strings.Contains(out, "would remove") {
		t.Fatalf("prune --dry-run: %s", out)
	}
	archive := filepath.Join(t.TempDir(), "old.db")
	var pr struct {
		Removed []struct{ Session string } `json:"removed"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "prune", db, "--session", "g", "--session", "f1", "--archive", archive, "--json")), &pr); err != nil {
		t.Fatal(err)
	}
	if len(pr.Removed) != 2 || pr.Removed[0].Session != "g" {
		t.Fatalf("prune: %+v, want g then f1", pr)
	}
	mustCLI(t, "verify", archive)
	if got := mustCLI(t, "resume", archive, "--session", "g"); got != want {
		t.Fatal("the archive's fork resumes to other bytes")
	}
	var vac struct {
		Before int64 `json:"bytes_before"`
		After  int64 `json:"bytes_after"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "vacuum", db, "--json")), &vac); err != nil || vac.After <= 0 || vac.After > vac.Before {
		t.Fatalf("vacuum: %+v %v", vac, err)
	}
	mustCLI(t, "verify", db)
	wantCode(t, cli(t, "", "vacuum", "postgres://x/y"), exitUsage, "vacuum of a URL")
}
