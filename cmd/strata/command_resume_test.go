package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestResume(t *testing.T) {
	t.Parallel()
	db := replayed(t, []string{"--every", "2", "--fold", "2"}, incident(t))

	text := mustCLI(t, "resume", "--db", db, "--session", "mig")
	if !strings.HasPrefix(text, "# strata context\nsession: mig\nsource: marker 4\n") {
		t.Errorf("text:\n%s", text)
	}
	j := resume(t, db, "mig")
	if j.Context != text || j.Source != "marker" || *j.Marker != 4 || j.Checkpoint != nil {
		t.Errorf("--json: %+v", j)
	}
	if len(j.SHA256) != 64 {
		t.Errorf("sha256 %q", j.SHA256)
	}
	out := mustCLI(t, "resume", "--db", db, "--session", "mig", "--json")
	for _, k := range []string{`"session"`, `"source"`, `"marker"`, `"checkpoint"`, `"reason"`, `"sha256"`, `"context"`} {
		if !strings.Contains(out, k+":") {
			t.Errorf("--json lacks %s", k)
		}
	}

	// Marker 1 was folded into node 3: resume falls back, wholesale, to a
	// checkpoint and says why.
	old := resume(t, db, "mig", "--marker", "1")
	if old.Source != "checkpoint" || *old.Marker != 1 || !strings.Contains(old.Reason, "folded into") {
		t.Errorf("--marker 1: %+v", old)
	}
	for _, k := range []string{keyRejected, keyArtifact} {
		if !strings.Contains(old.Context, k) {
			t.Errorf("--marker 1: the context lacks %s", k)
		}
	}
	if got := resume(t, db, "mig", "--marker", "4"); got.SHA256 != j.SHA256 {
		t.Errorf("--marker 4 and latest differ")
	}
}

func TestResume_Errors(t *testing.T) {
	t.Parallel()
	db := replayed(t, []string{"--every", "2"}, incident(t))
	for _, args := range [][]string{
		{"resume", "--session", "mig"},
		{"resume", "--db", db},
		{"resume", "--db", db, "--session", "mig", "--marker", "first"},
		{"resume", "--db", db, "--session", "mig", "--marker", "0"},
		{"resume", "--db", db, "--session", "mig", "extra"},
		{"resume", db, "--db", db, "--session", "mig"},
		{"resume", db, "extra", "--session", "mig"},
	} {
		wantCode(t, cli(t, "", args...), exitUsage, args...)
	}
	for _, dbArgs := range [][]string{{db}, {"--db", db}} {
		r := cli(t, "", append([]string{"resume"}, dbArgs...)...)
		wantCode(t, r, exitUsage, dbArgs...)
		if want := "Error: --session is required\nHint: to list the sessions' ids, run: strata sessions " + shellQuote(db) + "\n"; !strings.HasPrefix(r.stderr, want) {
			t.Errorf("resume %v: stderr %q, want it to start with %q", dbArgs, r.stderr, want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"resume", "--db", db, "--session", "nope"}, "session not found\nHint: to list the sessions, run: strata sessions " + db + "\n"},
		{[]string{"resume", db, "--session", "nope"}, "session not found\nHint: to list the sessions, run: strata sessions " + db + "\n"},
		{[]string{"resume", "--db", db, "--session", "mig", "--marker", "99"}, "not found\nHint: to list the session's markers, run: strata dump " + db + " --session mig\n"},
	} {
		r := cli(t, "", tc.args...)
		wantCode(t, r, exitError, tc.args...)
		if !strings.HasSuffix(r.stderr, tc.want) {
			t.Errorf("%v: stderr %q, want it to end with %q", tc.args, r.stderr, tc.want)
		}
	}
}

// The database as the first argument or as --db: the same context.
func TestResume_DBArgument(t *testing.T) {
	t.Parallel()
	db := replayed(t, []string{"--every", "2"}, incident(t))
	for _, f := range [][]string{{}, {"--json"}, {"--marker", "1"}} {
		a := mustCLI(t, append([]string{"resume", "--db", db, "--session", "mig"}, f...)...)
		b := mustCLI(t, append([]string{"resume", db, "--session", "mig"}, f...)...)
		if a != b || a == "" {
			t.Errorf("%v: resume DB and resume --db DB differ:\n%s", f, firstDiff(b, a))
		}
	}
	r := cli(t, "", "resume", "--session", "mig")
	wantCode(t, r, exitUsage)
	if !strings.HasPrefix(r.stderr, "Error: resume needs a database: give it as the first argument (strata resume DB|URL") {
		t.Errorf("stderr %q", r.stderr)
	}
}

// TestResume_Budget: on a real Claude Code session with two tool uses the
// user rejected, `resume --budget` keeps the task and the newest request,
// shows each rejection once (as a rejection, not a standing failure),
// stays within its budget, counts what it leaves out in --json, and names
// the whole context by the sha256 that `resume` without --budget gives.
func TestResume_Budget(t *testing.T) {
	t.Parallel()
	src := filepath.Join("..", "..", "..", "shared", "data", "transcripts", "claude-code", "entireio_cli_86-9d11344fce-1-full.jsonl")
	if _, err := os.Stat(src); err != nil {
		t.Skipf("the real transcript is absent: %v", err)
	}
	db := tempDB(t)
	mustCLI(t, "import", "--format", "claude-code", "--db", db, src)
	const session = "3ae3ab59-52bc-413d-ad30-02b165c91785"
	whole := resume(t, db, session)

	text := mustCLI(t, "resume", db, "--session", session, "--budget", "640")
	for _, want := range []string{"## the task (the user's first request, seq 1)", "Implement the following plan:",
		"## the user's newest request (seq 208)", "whole context: " + strconv.Itoa(len(whole.Context)) + " bytes, sha256 " + whole.SHA256,
		"- rejected: call toolu_01112DfVkMV5f9eaoAgs6hD4 (ExitPlanMode) at seq 240", "(ExitPlanMode), call toolu_01Pw2UCC3yWMhYMa8kj3Zyp1 at seq 246"} {
		if !strings.Contains(text, want) {
			t.Errorf("the fitted state lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "FAILED") {
		t.Errorf("a rejection is shown as a failure:\n%s", text)
	}
	var j struct {
		SHA256  string `json:"sha256"`
		Tokens  int    `json:"tokens"`
		Facts   int    `json:"facts"`
		Shown   int    `json:"shown"`
		LeftOut []struct {
			Class string `json:"class"`
			Count int    `json:"count"`
		} `json:"left_out"`
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "resume", db, "--session", session, "--budget", "640", "--json")), &j); err != nil {
		t.Fatal(err)
	}
	left := 0
	for _, l := range j.LeftOut {
		left += l.Count
	}
	if j.State != text || j.SHA256 != whole.SHA256 || j.Tokens > 640 || left == 0 || j.Shown+left != j.Facts {
		t.Errorf("--json: sha256 %s (want %s), %d tokens, %d shown + %d left out of %d", j.SHA256, whole.SHA256, j.Tokens, j.Shown, left, j.Facts)
	}
	// The whole context is unchanged by the flag's existence.
	if again := resume(t, db, session); again.SHA256 != whole.SHA256 || again.Context != whole.Context {
		t.Errorf("resume without --budget changed")
	}
	r := cli(t, "", "resume", db, "--session", session, "--budget", "10")
	wantCode(t, r, exitUsage, "resume", "--budget", "10")
}
