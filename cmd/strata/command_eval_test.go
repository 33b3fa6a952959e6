package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-go/strata/eval"
)

func TestEval_JSON(t *testing.T) {
	args := []string{"eval", "--json", "--every-events", "6", "--fold", "2", "--drop-rate", "0.3",
		"--retries", "0,1,3", "--seed", "7", "--dir", t.TempDir(), incident(t)}
	var rep eval.Report
	if err := json.Unmarshal([]byte(mustCLI(t, args...)), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Sessions != 1 || rep.Events != 41 || len(rep.Strata) != 3 || rep.Strata[2].Retries != 3 {
		t.Fatalf("report: %d sessions, %d events, %d strata arms", rep.Sessions, rep.Events, len(rep.Strata))
	}
	if rep.Naive.Unsound == 0 || rep.Naive.StateLoss == 0 {
		t.Errorf("naive: %d unsound markers, %d facts lost", rep.Naive.Unsound, rep.Naive.StateLoss)
	}
	for _, a := range rep.Strata {
		if a.StateLoss != 0 || a.Divergent != 0 || a.Resumes == 0 {
			t.Errorf("strata retries %d: %d facts lost, %d divergent, %d resumes", a.Retries, a.StateLoss, a.Divergent, a.Resumes)
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
		" mig      41   naive", // a per-session row
		"   naive        -",
		"  strata        0",
		"  strata        2",
		"naive -: ",
		"strata 2: ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out = mustCLI(t, "eval", "--per-session=false", "--every-events", "6", "--dir", t.TempDir(), incident(t))
	if strings.Contains(out, "session  ") {
		t.Errorf("--per-session=false printed the per-session table:\n%s", out)
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
		{"eval", "--every", "0", "x.jsonl"},
		{"eval", "--class-rate", "nope=0.1", "x.jsonl"},
		{"eval", "--class-rate", "negatives", "x.jsonl"},
	} {
		r := cli(t, "", args...)
		wantCode(t, r, exitUsage, args...)
	}
	r := cli(t, "", "eval", "--every-events", "5", filepath.Join(t.TempDir(), "missing.jsonl"))
	wantCode(t, r, exitError)
}
