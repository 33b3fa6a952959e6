package eval_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/eval"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

func incidentSessions(t testing.TB) []eval.Session {
	t.Helper()
	files, err := filepath.Glob("../testdata/incident/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("incident fixtures: %v", err)
	}
	s, err := eval.ReadFiles(files...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// realSessions returns every nth real session (all for n = 1).
func realSessions(t testing.TB, n int) []eval.Session {
	t.Helper()
	s, err := eval.ReadFiles(dbtest.RealSessions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	var sub []eval.Session
	for i := 0; i < len(s); i += n {
		sub = append(sub, s[i])
	}
	return sub
}

// every returns n, or short with -short.
func every(n, short int) int {
	if testing.Short() {
		return short
	}
	return n
}

// fastDir returns a temporary directory on a tmpfs where there is one: eval
// makes thousands of small databases, and a tmpfs spares the disk.
func fastDir(t testing.TB) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "strata-eval-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

func run(t testing.TB, sessions []eval.Session, opts eval.Options) *eval.Report {
	t.Helper()
	opts.Dir = fastDir(t)
	rep, err := eval.Run(context.Background(), sessions, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// checkPromise checks what eval exists to show: the strata arms lose no
// state and never diverge, on every session, at every retry count; the
// repair arm never falls back; and naive, which committed unsound markers,
// lost state.
func checkPromise(t *testing.T, rep *eval.Report) {
	t.Helper()
	for _, s := range rep.PerSession {
		for _, a := range s.Arms {
			if a.Divergent != 0 {
				t.Errorf("%s: %s (retries %d): %d divergent resumes (resume is deterministic whatever it serves)", s.Session, a.Arm, a.Retries, a.Divergent)
			}
			switch a.Arm {
			case eval.ArmNaive:
				if a.Refused != 0 || a.Fallbacks != 0 || a.Repaired != 0 {
					t.Errorf("%s: naive refused %d, fell back %d, repaired %d: it trusts every summary", s.Session, a.Refused, a.Fallbacks, a.Repaired)
				}
				continue
			case eval.ArmRepair:
				if a.Refused != 0 || a.Fallbacks != 0 {
					t.Errorf("%s: strata-repair (retries %d) refused %d, fell back %d", s.Session, a.Retries, a.Refused, a.Fallbacks)
				}
			case eval.ArmRefuse:
				if a.Repaired != 0 {
					t.Errorf("%s: strata-refuse repaired %d", s.Session, a.Repaired)
				}
			}
			if a.StateLoss != 0 || a.LossyResumes != 0 {
				t.Errorf("%s: %s (retries %d) lost %d facts in %d resumes: %+v", s.Session, a.Arm, a.Retries, a.StateLoss, a.LossyResumes, a.LossByClass)
			}
			if a.Unsound != 0 {
				t.Errorf("%s: %s committed %d unsound markers", s.Session, a.Arm, a.Unsound)
			}
			if a.Refused != a.Compactions-a.Committed {
				t.Errorf("%s: %s: %d compactions, %d committed, %d refused", s.Session, a.Arm, a.Compactions, a.Committed, a.Refused)
			}
		}
	}
	for _, a := range rep.Arms {
		if a.Arm == eval.ArmNaive {
			if a.Unsound == 0 {
				t.Fatalf("naive at p=%g committed no unsound marker: nothing was dropped, the test proves nothing", a.DropRate)
			}
			if a.StateLoss == 0 || a.LossyResumes == 0 {
				t.Errorf("naive at p=%g committed %d unsound markers and lost no state", a.DropRate, a.Unsound)
			}
		}
		if a.Resumes == 0 {
			t.Errorf("%s (p=%g, retries %d): no resume measured", a.Arm, a.DropRate, a.Retries)
		}
	}
}

func TestRun_Incident(t *testing.T) {
	opts := eval.Options{
		Policy:     compaction.Policy{EveryEvents: 6, Fold: 2},
		Model:      compaction.Probabilistic{Seed: 7, Bias: compaction.DefaultBias, PressureFacts: compaction.DefaultPressureFacts},
		DropRates:  []float64{0.3},
		Stickiness: []float64{0, 0.7},
		Retries:    []int{0, 1, 3}, Repair: true, Verify: true,
	}
	rep := run(t, incidentSessions(t), opts)
	checkPromise(t, rep)
	if rep.Sessions != 2 || rep.Events != 136 {
		t.Errorf("%d sessions, %d events; want the 2 fixtures' 136", rep.Sessions, rep.Events)
	}
	// naive; refuse and repair at 0 retries; both at 1 and 3 retries, per ρ.
	if len(rep.Arms) != 1+2+2*2*2 {
		t.Fatalf("%d arms: %+v", len(rep.Arms), rep.Arms)
	}
	naive := rep.Find(eval.ArmNaive, 0.3, 0, 0)
	// Every session that naive left unsound lost state there.
	for _, s := range rep.PerSession {
		if n := s.Arms[0]; n.Unsound > 0 && n.StateLoss == 0 {
			t.Errorf("%s: naive committed %d unsound markers, lost nothing", s.Session, n.Unsound)
		}
	}
	refuse0, repair0 := rep.Find(eval.ArmRefuse, 0.3, 0, 0), rep.Find(eval.ArmRepair, 0.3, 0, 0)
	if refuse0.Refused == 0 || refuse0.Fallbacks == 0 {
		t.Errorf("strata-refuse at 0 retries: %d refused, %d fallbacks at p=0.3", refuse0.Refused, refuse0.Fallbacks)
	}
	// With no retry every refused attempt of the repair arm is repaired,
	// and stays counted in the audit. It commits every L1 span, as naive
	// does, and draws the same coins for them; it may fold less (a fold
	// once refused keeps the roots before it out of later folds).
	if repair0.Repaired == 0 || repair0.Repaired != repair0.RefusedAttempts || repair0.Compactions > naive.Compactions {
		t.Errorf("strata-repair at 0 retries: %d compactions, %d repaired, %d refused attempts; naive %d compactions, %d unsound",
			repair0.Compactions, repair0.Repaired, repair0.RefusedAttempts, naive.Compactions, naive.Unsound)
	}
	for _, rho := range []float64{0, 0.7} {
		r3 := rep.Find(eval.ArmRefuse, 0.3, rho, 3)
		if r3.Refused > refuse0.Refused {
			t.Errorf("ρ=%g: 3 retries refused %d, 0 retries %d", rho, r3.Refused, refuse0.Refused)
		}
	}
	if s0, s7 := rep.Find(eval.ArmRefuse, 0.3, 0, 3), rep.Find(eval.ArmRefuse, 0.3, 0.7, 3); s7.RefusedAttempts <= s0.RefusedAttempts {
		t.Errorf("3 retries: ρ=0.7 %d refused attempts, ρ=0 %d: sticky drops should be refused more often", s7.RefusedAttempts, s0.RefusedAttempts)
	}
	for _, a := range rep.Arms {
		if a.ContextTokens <= 0 || a.RawTokens <= 0 {
			t.Errorf("%s %d: context %d tokens, raw %d", a.Arm, a.Retries, a.ContextTokens, a.RawTokens)
		}
	}

	// Reproducible: the same seed gives the same report, whatever the
	// parallelism.
	opts.Parallel, opts.Verify = 1, false
	again := run(t, incidentSessions(t), opts)
	for j := range rep.Arms {
		if !sameArm(again.Arms[j], rep.Arms[j]) {
			t.Errorf("%s: %+v, then %+v", rep.Arms[j].Arm, rep.Arms[j], again.Arms[j])
		}
	}
}

func TestRun_Progress(t *testing.T) {
	var calls []int
	opts := eval.Options{Policy: compaction.Policy{EveryEvents: 6}, DropRates: []float64{0.1, 0.2}, Retries: []int{0, 1}, Repair: true,
		Progress: func(done, total int) {
			if total != 2*2*5 {
				t.Errorf("total %d runs, want 2 sessions × 2 rates × 5 arms", total)
			}
			calls = append(calls, done)
		}}
	run(t, incidentSessions(t), opts)
	if len(calls) != 20 || calls[19] != 20 || !slices.IsSorted(calls) {
		t.Errorf("progress calls %v", calls)
	}
}

func TestRun_BadOptions(t *testing.T) {
	for _, opts := range []eval.Options{
		{Retries: []int{-1}},
		{Retries: []int{1, 1}},
		{DropRates: []float64{0.1, 0.1}},
		{DropRates: []float64{}},
		{DropRates: []float64{1.5}},
		{Stickiness: []float64{2}, Retries: []int{1}},
		{Model: compaction.Probabilistic{Bias: -1}},
		{Policy: compaction.Policy{Fold: 1}},
	} {
		if _, err := eval.Run(context.Background(), nil, opts); !errors.Is(err, eval.ErrBadOptions) {
			t.Errorf("Run(%+v): %v, want ErrBadOptions", opts, err)
		}
	}
}

func sameArm(a, b eval.Arm) bool {
	if len(a.RefusalsByClass) != len(b.RefusalsByClass) {
		return false
	}
	for c, n := range a.RefusalsByClass {
		if b.RefusalsByClass[c] != n {
			return false
		}
	}
	a.RefusalsByClass, b.RefusalsByClass = nil, nil
	return reflect.DeepEqual(a, b)
}

func TestRun_RealSessions(t *testing.T) {
	// Every session takes long under -race: every fourth one, every
	// twelfth with -short.
	sessions := realSessions(t, every(4, 12))
	rep := run(t, sessions, eval.Options{
		Policy:     compaction.Policy{EveryTurns: 40, EveryEvents: 20, Fold: 4},
		Model:      compaction.Probabilistic{Seed: 1, Bias: compaction.DefaultBias, PressureFacts: compaction.DefaultPressureFacts},
		DropRates:  []float64{0.1},
		Stickiness: []float64{compaction.DefaultStickiness},
		Retries:    []int{1}, Repair: true, Verify: true,
	})
	checkPromise(t, rep)
	naive, refuse, repair := rep.Arms[0], rep.Arms[1], rep.Arms[2]
	t.Logf("%d sessions, %d events: naive %d compactions, %d unsound, %d facts lost in %d of %d resumes; refuse r=1: %d refused, %d fallbacks; repair r=1: %d repaired",
		rep.Sessions, rep.Events, naive.Compactions, naive.Unsound, naive.StateLoss, naive.LossyResumes, naive.Resumes,
		refuse.Refused, refuse.Fallbacks, repair.Repaired)
	if refuse.Fallbacks == 0 || repair.Repaired == 0 {
		t.Errorf("sticky drops at p=0.1 and one retry: %d fallbacks, %d repairs", refuse.Fallbacks, repair.Repaired)
	}
}

// TestRun_RefusalRateMatchesPrediction checks the harness and the model
// together: the refused compactions measured agree, within 4σ, with what
// compaction.Probabilistic.RefusalProbability predicts from the required
// facts of each span asked for — for independent drops, and for drops
// biased towards negatives and artifacts, under pressure and sticky across
// retries. The run is deterministic given its seeds, so the bound does not
// make the test flaky; it is meaningful because the expected counts are
// large.
func TestRun_RefusalRateMatchesPrediction(t *testing.T) {
	// Every eighth real session (every sixteenth with -short) at an L1 span
	// every 5 events is a few hundred spans per case: tens of expected
	// refusals at least, σ a fraction of them. The drop rates are high so
	// that each span is refused with a chance near one half, where the
	// variance — and so the check's power per span — is largest.
	sessions := realSessions(t, every(8, 16))
	pressed := compaction.Probabilistic{Bias: 3, PressureFacts: compaction.DefaultPressureFacts}
	for _, tc := range []struct {
		model   compaction.Probabilistic
		p, rho  float64
		retries int
		seed    uint64 // one per case: the same seed draws the same coins at every rate
	}{
		{compaction.Probabilistic{}, 0.15, 0, 0, 1},
		{compaction.Probabilistic{}, 0.4, 0, 1, 2},
		{compaction.Probabilistic{}, 0.55, 0, 2, 3},
		{pressed, 0.05, 0, 0, 4},
		{pressed, 0.1, 0.7, 1, 5},
		{pressed, 0.12, 0.5, 3, 6},
	} {
		m := tc.model
		m.Seed = tc.seed
		rep := run(t, sessions, eval.Options{
			Policy: compaction.Policy{EveryEvents: 5, Fold: 4},
			Model:  m, DropRates: []float64{tc.p}, Stickiness: []float64{tc.rho}, Retries: []int{tc.retries}, Repair: true,
			CountOnly: true,
		})
		naive, a, repair := rep.Arms[0], rep.Arms[1], rep.Arms[2]
		if a.Compactions < 100 {
			t.Fatalf("only %d compactions", a.Compactions)
		}
		sigma := math.Sqrt(a.PredictedVar)
		t.Logf("p=%g ρ=%g bias %g pressure %g, retries=%d: refused %d, predicted %.1f ± %.1f; repaired %d, predicted %.1f; naive unsound %d, predicted %.1f ± %.1f",
			tc.p, tc.rho, m.Bias, m.PressureFacts, tc.retries, a.Refused, a.PredictedRefused, sigma, repair.Repaired, repair.PredictedRefused,
			naive.Unsound, naive.PredictedRefused, math.Sqrt(naive.PredictedVar))
		if a.PredictedRefused < 25 {
			t.Fatalf("p=%g retries=%d: only %.1f refusals expected: too few spans for the check to mean anything", tc.p, tc.retries, a.PredictedRefused)
		}
		for _, x := range []struct {
			what string
			got  int
			arm  *eval.Arm
		}{{"refused", a.Refused, &a}, {"repaired", repair.Repaired, &repair}, {"naive unsound", naive.Unsound, &naive}} {
			if sd := math.Sqrt(x.arm.PredictedVar); math.Abs(float64(x.got)-x.arm.PredictedRefused) > 4*sd {
				t.Errorf("p=%g ρ=%g retries=%d: %s %d, predicted %.1f ± %.1f (%.1fσ off)", tc.p, tc.rho, tc.retries, x.what, x.got,
					x.arm.PredictedRefused, sd, math.Abs(float64(x.got)-x.arm.PredictedRefused)/sd)
			}
		}
	}
}

func TestStateLoss(t *testing.T) {
	truth := eval.NewTruth()
	for i, e := range []tier.Event{
		{Kind: tier.KindToolCall, ID: "c1"},
		{Kind: tier.KindToolCall, ID: "c2"},
		{Kind: tier.KindToolResult, ID: "c1"},
		{Kind: tier.KindConstraint, Key: "reversible"},
		{Kind: tier.KindConstraint, Key: "fast"},
		{Kind: tier.KindWithdrawn, Key: "fast"},
		{Kind: tier.KindRejected, Key: "approach/a"},
		{Kind: tier.KindArtifact, Key: "down.sql"},
		{Kind: tier.KindOpen, ID: "h1"},
		{Kind: tier.KindToolCall, ID: "c3", Name: "deploy"},
		{Kind: tier.KindToolResult, ID: "c3", Failed: true, Text: "denied"},
	} {
		e.Seq = uint64(i + 1)
		if err := truth.Apply(&e); err != nil {
			t.Fatal(err)
		}
	}
	whole := &checkpoint.Context{Nodes: []tier.Node{{Claims: tier.Claims{
		Unresolved:   []tier.Open{{ID: "c1", Kind: tier.KindToolCall}, {ID: "c2", Kind: tier.KindToolCall}},
		Constraints:  []tier.Constraint{{Key: "reversible"}, {Key: "fast"}},
		Dispositions: []tier.Disposition{{Key: "approach/a", State: tier.KindRejected}},
	}}, {Claims: tier.Claims{
		Resolved:    []tier.Resolution{{ID: "c1", Kind: tier.KindToolCall}},
		Unresolved:  []tier.Open{{ID: "c2", Kind: tier.KindToolCall}},
		Constraints: []tier.Constraint{{Key: "fast", Withdrawn: true}},
		Artifacts:   []tier.Artifact{{Key: "down.sql"}},
		Failures:    []tier.Resolution{{ID: "c3", Kind: tier.KindToolCall, Seq: 10, At: 11, Failed: true}},
	}}}, Events: []tier.Event{{Seq: 9, Kind: tier.KindOpen, ID: "h1"}}}
	if l, items := eval.StateLoss(truth, whole); l.Total() != 0 {
		t.Fatalf("a whole context: loss %+v %q", l, items)
	}

	// Drop the second node's claims: c1 stays UNRESOLVED, fast stays
	// active, the artifact and the failed call are missing; and the raw
	// tail's handle too.
	lossy := &checkpoint.Context{Nodes: whole.Nodes[:1]}
	l, items := eval.StateLoss(truth, lossy)
	want := []string{"artifact:down.sql", "constraint:fast", "failure:c3@10", "open:c1", "open:h1"}
	if len(items) != len(want) {
		t.Fatalf("loss %+v %q, want %q", l, items, want)
	}
	for i := range want {
		if items[i] != want[i] {
			t.Fatalf("loss %q, want %q", items, want)
		}
	}
	if l != (eval.Loss{Open: 2, Failures: 1, Constraints: 1, Artifacts: 1}) {
		t.Fatalf("loss %+v", l)
	}

	// A wrong state is a loss: failed is not rejected.
	wrong := &checkpoint.Context{Nodes: whole.Nodes, Events: append(whole.Events[:1:1], tier.Event{Seq: 10, Kind: tier.KindFailed, Key: "approach/a"})}
	if l, _ := eval.StateLoss(truth, wrong); l != (eval.Loss{Dispositions: 1}) {
		t.Fatalf("wrong disposition: loss %+v", l)
	}

	// A failed call held in the raw tail is not lost; one the log never
	// failed is.
	tail := &checkpoint.Context{Nodes: whole.Nodes[:1], Events: []tier.Event{
		{Seq: 11, Kind: tier.KindToolResult, ID: "c3", Failed: true, Opener: 10}}}
	if _, items := eval.StateLoss(truth, tail); slices.Contains(items, "failure:c3@10") {
		t.Errorf("a failure in the raw tail counted lost: %q", items)
	}
	invented := &checkpoint.Context{Nodes: append(slices.Clone(whole.Nodes), tier.Node{Claims: tier.Claims{
		Failures: []tier.Resolution{{ID: "c2", Seq: 2, Failed: true}}}}), Events: whole.Events}
	if l, _ := eval.StateLoss(truth, invented); l != (eval.Loss{Failures: 1}) {
		t.Errorf("an invented failure: loss %+v", l)
	}
}

// Imported events carry the refs of their records, several events to a
// record: eval, which appends event by event, reads them without.
func TestReadFiles_DropsRefs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "imported.jsonl")
	err := os.WriteFile(path, []byte(`{"session":"s","kind":"user","text":"go","ref":"u1"}
{"kind":"tool_call","id":"c1","name":"Write","text":"{}","ref":"a1"}
{"kind":"tool_result","id":"c1","text":"ok","ref":"u2"}
{"kind":"artifact","key":"x.go","text":"written","ref":"u2"}
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := eval.ReadFiles(path)
	if err != nil || len(ss) != 1 || len(ss[0].Events) != 4 {
		t.Fatalf("ReadFiles: %+v, %v", ss, err)
	}
	for _, e := range ss[0].Events {
		if e.Ref != "" {
			t.Errorf("event %+v keeps its ref", e)
		}
	}
	run(t, ss, eval.Options{Policy: compaction.Policy{EveryEvents: 2}, DropRates: []float64{0.5}, Retries: []int{0}})
}

// A session of more events than one store.Append takes is appended in
// calls of store.MaxAppendEvents (CountOnly appends a session whole): it
// is stored and compacted, not refused.
func TestRun_CountOnlyOverOneAppend(t *testing.T) {
	if testing.Short() {
		t.Skip("appends 100,001 events per arm")
	}
	n := store.MaxAppendEvents + 1
	evs := make([]tier.Event, n)
	for i := range evs {
		evs[i] = tier.Event{Kind: tier.KindUser, Text: fmt.Sprintf("m%d", i)}
	}
	rep := run(t, []eval.Session{{ID: "long", Events: evs}}, eval.Options{
		Policy: compaction.Policy{EveryEvents: n / 2}, DropRates: []float64{0}, Retries: []int{0},
		CountOnly: true, Verify: true, Parallel: 1,
	})
	for _, a := range rep.Arms {
		if a.Committed < 2 {
			t.Errorf("arm %s: %d committed, want the two spans of %d events", a.Arm, a.Committed, n/2)
		}
	}
}
