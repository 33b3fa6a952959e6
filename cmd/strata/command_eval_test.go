package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/strata-go/strata/eval"
)

func TestEval_JSON(t *testing.T) {
	args := []string{"eval", "--json", "--every-events", "6", "--fold", "2", "--drop-rate", "0.3",
		"--retries", "0,1,3", "--stickiness", "0,0.7", "--seed", "7", "--dir", t.TempDir(), incident(t)}
	var rep eval.Report
	if err := json.Unmarshal([]byte(mustCLI(t, args...)), &rep); err != nil {
		t.Fatal(err)
	}
	// naive; refuse and repair at 0 retries; both at 1 and 3 retries per ρ.
	if rep.Sessions != 1 || rep.Events != 41 || len(rep.Arms) != 1+2+2*2*2 {
		t.Fatalf("report: %d sessions, %d events, %d arms", rep.Sessions, rep.Events, len(rep.Arms))
	}
	if rep.Model.Bias != 2 || rep.Model.PressureFacts != 3 || !rep.Repair {
		t.Errorf("model %+v, repair %v: want the defaults", rep.Model, rep.Repair)
	}
	naive := rep.Find(eval.ArmNaive, 0.3, 0, 0)
	if naive == nil || naive.Unsound == 0 || naive.StateLoss == 0 {
		t.Errorf("naive: %+v", naive)
	}
	if a := rep.Find(eval.ArmRepair, 0.3, 0.7, 3); a == nil || a.Fallbacks != 0 || a.Refused != 0 {
		t.Errorf("strata-repair, 3 retries, ρ=0.7: %+v", a)
	}
	for _, a := range rep.Arms {
		if a.Arm == eval.ArmNaive {
			continue
		}
		if a.StateLoss != 0 || a.Divergent != 0 || a.Resumes == 0 {
			t.Errorf("%s retries %d ρ %g: %d facts lost, %d divergent, %d resumes", a.Arm, a.Retries, a.Stickiness, a.StateLoss, a.Divergent, a.Resumes)
		}
	}
	// Deterministic given the seed.
	if again := mustCLI(t, args...); again != mustCLI(t, args...) {
		t.Error("two runs with one seed differ")
	}
}

func TestEval_Text(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "incident", "*.jsonl"))
	out := mustCLI(t, append([]string{"eval", "--every-events", "6", "--drop-rate", "0.3", "--retries", "0,2", "--dir", t.TempDir()}, files...)...)
	for _, want := range []string{
		"strata eval: 2 sessions, 136 events",
		"negatives and artifacts at 2× p, pressure ×2 at 3 facts, seed 1",
		"  mig      41  0.3    -          naive", // a per-session row
		"0.3    -          naive        -",
		"0.3    -  strata-refuse        0",
		"0.3    -  strata-repair        0",
		"0.3  0.7  strata-refuse        2",
		"0.3  0.7  strata-repair        2",
		"p 0.3 ρ - naive -: ",
		"p 0.3 ρ 0.7 strata-repair 2: ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out = mustCLI(t, "eval", "--per-session=false", "--repair=false", "--every-events", "6", "--dir", t.TempDir(), incident(t))
	if strings.Contains(out, "session  ") {
		t.Errorf("--per-session=false printed the per-session table:\n%s", out)
	}
	if !regexp.MustCompile(`^strata eval: 1 session, \d+ events;`).MatchString(out) {
		t.Errorf("one session is not counted in the singular:\n%s", out)
	}
	if strings.Contains(out, "  strata-repair  ") {
		t.Errorf("--repair=false ran the repair arm:\n%s", out)
	}
}

// TestEval_Grid: --grid runs the documented grid, and does not mix with
// the flags it sets.
func TestEval_Grid(t *testing.T) {
	var rep eval.Report
	out := mustCLI(t, "eval", "--grid", "--json", "--every-events", "10", "--dir", t.TempDir(), incident(t))
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.DropRates, []float64{0.02, 0.05, 0.1}) || !slices.Equal(rep.Stickiness, []float64{0, 0.7}) ||
		!slices.Equal(rep.Retries, []int{0, 3}) || len(rep.Arms) != 3*(1+2+2*2) {
		t.Errorf("grid: rates %v, ρ %v, retries %v, %d arms", rep.DropRates, rep.Stickiness, rep.Retries, len(rep.Arms))
	}
	r := cli(t, "", "eval", "--grid", "--retries", "1", incident(t))
	wantCode(t, r, exitUsage)
}

// TestEval_Progress: on a terminal (here forced) eval shows the runs done
// on stderr, and erases the line before it prints.
func TestEval_Progress(t *testing.T) {
	t.Setenv(progressEnv, "1")
	old := progressEvery
	progressEvery = 0
	t.Cleanup(func() { progressEvery = old })
	r := cli(t, "", "eval", "--per-session=false", "--every-events", "6", "--dir", t.TempDir(), incident(t))
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stderr, "eval: 3 of 3 runs (100%), 1 session,") || !strings.HasSuffix(r.stderr, "\r\x1b[K") {
		t.Errorf("stderr %q", r.stderr)
	}
	t.Setenv(progressEnv, "0")
	if r := cli(t, "", "eval", "--every-events", "6", "--dir", t.TempDir(), incident(t)); r.stderr != "" {
		t.Errorf("progress off: stderr %q", r.stderr)
	}
}

func TestEval_Usage(t *testing.T) {
	for _, args := range [][]string{
		{"eval"},
		{"eval", "--drop-rate", "1.5", "x.jsonl"},
		{"eval", "--retries", "0,x", "x.jsonl"},
		{"eval", "--retries", "1,1", "x.jsonl"},
		{"eval", "--retries", "-1", "x.jsonl"},
		{"eval", "--fold", "1", "x.jsonl"},
		{"eval", "--every-tokens", "0", "x.jsonl"},
		{"eval", "--every-tokens", "-1", "x.jsonl"},
		{"eval", "--class-rate", "nope=0.1", "x.jsonl"},
		{"eval", "--class-rate", "negatives", "x.jsonl"},
		{"eval", "--drop-rate", "0.1,0.1", "x.jsonl"},
		{"eval", "--drop-rate", "0.1,", "x.jsonl"},
		{"eval", "--stickiness", "1.2", "x.jsonl"},
		{"eval", "--bias", "-1", "x.jsonl"},
		{"eval", "--pressure", "-3", "x.jsonl"},
		{"eval", "--stickiness", "0.5", "x.jsonl"}, // no effect without retries
	} {
		r := cli(t, "", args...)
		wantCode(t, r, exitUsage, args...)
	}
	r := cli(t, "", "eval", "--every-events", "5", filepath.Join(t.TempDir(), "missing.jsonl"))
	wantCode(t, r, exitError)
}
