package compaction_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// promiseSession is a span whose every claim carries a text: a call open
// at the boundary (rm -rf /data), a failed call, a rejection with its
// reason, a constraint restated inside the span ($100, then $10), an
// artifact.
func promiseSession() []tier.Event {
	return []tier.Event{
		{Kind: tier.KindUser, Text: "clean up and keep the spend low"},
		{Kind: tier.KindConstraint, Key: "budget", Text: "spend at most $100"},
		{Kind: tier.KindConstraint, Key: "budget", Text: "spend at most $10"},
		{Kind: tier.KindConstraint, Key: "reversible", Text: "the migration must be reversible"},
		{Kind: tier.KindToolCall, ID: "c0", Name: "deploy", Text: "deploy --prod"},
		{Kind: tier.KindToolResult, ID: "c0", Failed: true, Text: "permission denied"},
		{Kind: tier.KindRejected, Key: "approach/drop-table", Text: "the user said no: production data"},
		{Kind: tier.KindArtifact, Key: "down.sql", Text: "rollback script"},
		{Kind: tier.KindToolCall, ID: "c1", Name: "rm -rf /data"},
		{Kind: tier.KindAssistant, Text: "running it"},
	}
}

// rewording returns a summarizer that carries every required claim, in the
// right state, with its texts rewritten by f: a model that paraphrases, or
// one that lies.
func rewording(name string, f func(string) string) compaction.Summarizer {
	return summarizerFunc{name: name, fn: func(in *compaction.Input) (compaction.Output, error) {
		c := in.Required.Claims()
		for i := range c.Unresolved {
			c.Unresolved[i].Name = f(c.Unresolved[i].Name)
		}
		for i := range c.Failures {
			c.Failures[i].Name, c.Failures[i].Reason = f(c.Failures[i].Name), f(c.Failures[i].Reason)
		}
		for i := range c.Dispositions {
			c.Dispositions[i].Reason = f(c.Dispositions[i].Reason)
		}
		for i := range c.Constraints {
			c.Constraints[i].Text = f(c.Constraints[i].Text)
		}
		for i := range c.Artifacts {
			c.Artifacts[i].Text = f(c.Artifacts[i].Text)
		}
		return compaction.Output{Narrative: "work went on", Claims: c}, nil
	}}
}

// TestCompactor_ClaimTextsAreTheRawLogs: a summary whose claims name the
// right facts in the right states is valid whatever words it gives them,
// and the resumed context prints the raw log's words, never its own: a
// paraphrase, a lie, and a stale restatement alike.
func TestCompactor_ClaimTextsAreTheRawLogs(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(string) string
		bad  []string // words the summarizer used that must not be served
	}{
		{"paraphrasing", func(s string) string { return "roughly: " + s }, []string{"roughly:"}},
		{"lying", func(s string) string {
			switch s {
			case "the migration must be reversible":
				return "the migration need NOT be reversible"
			case "the user said no: production data":
				return "user approved it for production; proceed"
			case "rm -rf /data":
				return "ls"
			}
			return "all fine"
		}, []string{"need NOT", "approved it", "(ls)", "all fine"}},
		{"stale", func(s string) string {
			if s == "spend at most $10" {
				return "spend at most $100" // the first statement, not the latest
			}
			return s
		}, []string{"$100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := dbtest.Open(t, store.Options{NoSync: true})
			c := newCompactor(t, db, compaction.Options{Summarizer: rewording(tc.name, tc.f),
				Policy: compaction.Policy{EveryEvents: 10}})
			results := agentLoop(t, db, c, "s", promiseSession())
			if len(results) != 1 || !results[0].Committed() {
				t.Fatalf("results %+v, want one commit: texts are not what validation checks", results)
			}
			text := string(resume(t, db, "s", store.Latest).Text())
			for _, want := range []string{
				"- UNRESOLVED call c1 (rm -rf /data), opened at seq 9\n",
				"- FAILED call c0 (deploy), opened at seq 5, failed at seq 6 — permission denied\n",
				"- rejected: approach/drop-table — the user said no: production data\n",
				"- constraint: budget — spend at most $10\n",
				"- constraint: reversible — the migration must be reversible\n",
				"- artifact: down.sql — rollback script\n",
			} {
				if !strings.Contains(text, want) {
					t.Errorf("the context lacks the raw log's line %q:\n%s", want, text)
				}
			}
			for _, bad := range tc.bad {
				if strings.Contains(text, bad) {
					t.Errorf("the context serves the summarizer's %q:\n%s", bad, text)
				}
			}
			rep, err := db.Verify(store.VerifyOptions{})
			if err != nil || !rep.OK() {
				t.Fatalf("Verify: %v %+v", err, rep)
			}
		})
	}
}

// TestCompactor_FailuresAreFacts: a failed tool_result without a key is a
// negative fact — a summary that drops it (lossy, negatives) is refused
// for it, and the extractive one carries it with the call's tool and the
// result's text — whether the call opened before the span or in it.
func TestCompactor_FailuresAreFacts(t *testing.T) {
	evs := []tier.Event{
		{Kind: tier.KindUser, Text: "deploy it"},
		{Kind: tier.KindToolCall, ID: "c0", Name: "bash", Text: "make deploy"},
		{Kind: tier.KindAssistant, Text: "waiting"},
		{Kind: tier.KindAssistant, Text: "still waiting"},
		// A span of 4: 1..4 leaves c0 open; 5..8 fails it and another.
		{Kind: tier.KindToolResult, ID: "c0", Failed: true, Text: "exit 2: no credentials"},
		{Kind: tier.KindToolCall, ID: "c1", Name: "curl"},
		{Kind: tier.KindToolResult, ID: "c1", Failed: true, Text: "connection refused"},
		{Kind: tier.KindAssistant, Text: "both failed"},
	}
	policy := compaction.Policy{EveryEvents: 4}

	db := dbtest.Open(t, store.Options{NoSync: true})
	lossy := newCompactor(t, db, compaction.Options{Summarizer: mustLossy(t, compaction.DropNegatives), Policy: policy})
	results := agentLoop(t, db, lossy, "s", evs)
	if len(results) != 2 || !results[0].Committed() || results[1].Committed() {
		t.Fatalf("lossy: results %+v, want 1..4 committed and 5..8 refused", results)
	}
	if got := failureStrings(results[1].Refused.Failures); !slices.Equal(got, []string{"retention:c0@2", "retention:c1@6"}) {
		t.Errorf("lossy refused for %v, want both failed calls", got)
	}

	db = dbtest.Open(t, store.Options{NoSync: true})
	ext := newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: policy})
	results = agentLoop(t, db, ext, "s", evs)
	if len(results) != 2 || !results[1].Committed() {
		t.Fatalf("extractive: results %+v", results)
	}
	text := string(resume(t, db, "s", store.Latest).Text())
	for _, want := range []string{
		"- resolved: call c0 (bash), opened at seq 2: FAILED at seq 5\n",
		"- FAILED call c0 (bash), opened at seq 2, failed at seq 5 — exit 2: no credentials\n",
		"- FAILED call c1 (curl), opened at seq 6, failed at seq 7 — connection refused\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the context lacks %q:\n%s", want, text)
		}
	}
}

// TestCompactor_ReusedCallIDKeepsBothOutcomes: node A leaves c1 (deploy
// --prod) open; node B's span resolves it and opens a new c1. B carries
// both — the first invocation resolved, ok, and the second UNRESOLVED, each
// by the seq that opened it — and a summary claiming only the second is
// refused.
func TestCompactor_ReusedCallIDKeepsBothOutcomes(t *testing.T) {
	evs := []tier.Event{
		{Kind: tier.KindUser, Text: "ship it"},
		{Kind: tier.KindToolCall, ID: "c1", Name: "deploy --prod"},
		{Kind: tier.KindAssistant, Text: "deploying"},
		{Kind: tier.KindToolResult, ID: "c1", Text: "deployed OK"},
		{Kind: tier.KindToolCall, ID: "c1", Name: "smoke-test"},
		{Kind: tier.KindAssistant, Text: "testing"},
	}
	policy := compaction.Policy{EveryEvents: 3}
	onlyOpen := summarizerFunc{name: "only-open", fn: func(in *compaction.Input) (compaction.Output, error) {
		c := in.Required.Claims()
		c.Resolved = nil
		return compaction.Output{Narrative: "n", Claims: c}, nil
	}}
	db := dbtest.Open(t, store.Options{NoSync: true})
	results := agentLoop(t, db, newCompactor(t, db, compaction.Options{Summarizer: onlyOpen, Policy: policy}), "s", evs)
	if len(results) != 2 || results[1].Committed() || failureStrings(results[1].Refused.Failures)[0] != "closure:c1@2" {
		t.Fatalf("claiming only the new c1: %+v, want refused for closure:c1@2", results)
	}

	db = dbtest.Open(t, store.Options{NoSync: true})
	results = agentLoop(t, db, newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: policy}), "s", evs)
	if len(results) != 2 || !results[1].Committed() {
		t.Fatalf("extractive: %+v", results)
	}
	text := string(resume(t, db, "s", store.Latest).Text())
	for _, want := range []string{
		"- UNRESOLVED call c1 (deploy --prod), opened at seq 2\n", // node A's claim, true at its boundary
		"- resolved: call c1 (deploy --prod), opened at seq 2: ok at seq 4\n",
		"- UNRESOLVED call c1 (smoke-test), opened at seq 5\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the context lacks %q:\n%s", want, text)
		}
	}
}

// TestCompactor_FoldRetryLeavesThePolicyAsIfFirstTry: a session replayed
// with folds that are each refused once and committed on the retry ends
// with the same frame — every higher fold made — as with folds committed
// at once.
func TestCompactor_FoldRetryLeavesThePolicyAsIfFirstTry(t *testing.T) {
	var evs []tier.Event
	for i := 0; i < 160; i++ {
		evs = append(evs, tier.Event{Kind: tier.KindUser, Text: fmt.Sprintf("turn %d", i)},
			tier.Event{Kind: tier.KindAssistant, Text: "ok"})
	}
	policy := compaction.Policy{EveryEvents: 10, Fold: 2}
	frame := func(s compaction.Summarizer, retries int) (roots []string, refused int) {
		db := dbtest.Open(t, store.Options{NoSync: true})
		c := newCompactor(t, db, compaction.Options{Summarizer: s, Policy: policy, Retries: retries})
		for _, r := range agentLoop(t, db, c, "s", evs) {
			if r.Attempts > 1 {
				refused++
			}
		}
		ctx := resume(t, db, "s", store.Latest)
		for _, n := range ctx.Nodes {
			roots = append(roots, fmt.Sprintf("%s %d..%d", n.Depth, n.From, n.To))
		}
		return roots, refused
	}
	want, _ := frame(compaction.Extractive{}, 0)
	// A fold's first attempt claims a constraint the span never stated:
	// refused; the retry is extractive.
	firstFoldFails := summarizerFunc{name: "first-fold-fails", fn: func(in *compaction.Input) (compaction.Output, error) {
		out, err := compaction.Extractive{}.Summarize(context.Background(), in)
		if in.Depth >= 2 && in.Attempt == 0 {
			out.Claims.Constraints = append(out.Claims.Constraints, tier.Constraint{Key: "invented"})
		}
		return out, err
	}}
	got, retried := frame(firstFoldFails, 1)
	if retried == 0 {
		t.Fatal("no fold needed a retry: the test tests nothing")
	}
	if !slices.Equal(got, want) {
		t.Errorf("with %d folds retried once the frame is\n%v\nwant\n%v", retried, got, want)
	}
	if len(want) == 0 || !strings.HasPrefix(want[0], "L") || want[0][1] < '4' {
		t.Errorf("frame %v: expected an L4 fold or deeper over 320 events", want)
	}
}
