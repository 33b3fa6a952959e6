package openai_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/compaction/openai"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

const (
	keyRejected = "approach/add-column-then-backfill"
	keyArtifact = "migrations/003_down.sql"
)

// run appends events one at a time and runs the compactor after each, as
// an agent does; it stops at the first Run error.
func run(t *testing.T, db *store.DB, c *compaction.Compactor, session string, events []tier.Event) ([]compaction.Result, error) {
	t.Helper()
	var out []compaction.Result
	for i := range events {
		if _, err := db.Append(session, events[i]); err != nil {
			t.Fatalf("append event %d: %v", i+1, err)
		}
		rs, err := c.Run(context.Background(), session)
		out = append(out, rs...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func compactor(t *testing.T, db *store.DB, sum compaction.Summarizer, retries int, p compaction.Policy) *compaction.Compactor {
	t.Helper()
	c, err := compaction.NewCompactor(db, compaction.Options{Summarizer: sum, Policy: p, Retries: retries})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A model that carries every required claim: every compaction, L1 and the
// folds into L2, commits a valid marker through the real store, and resume
// serves the latest one with both of the incident's facts.
func TestSummarizer_Compactor_Commits(t *testing.T) {
	session, events := incidentEvents(t)
	f := newFake(t, faithful(t))
	sum, _ := newSummarizer(t, f, openai.Config{})
	db := dbtest.Open(t, store.Options{NoSync: true})
	c := compactor(t, db, sum, 0, compaction.Policy{EveryTurns: 2, Fold: 2})
	results, err := run(t, db, c, session, events)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var l1, l2 int
	for _, r := range results {
		if !r.Committed() {
			t.Fatalf("refused %s seq %d..%d: %v", r.Depth, r.From, r.To, r.Refused)
		}
		switch r.Depth {
		case 1:
			l1++
		case 2:
			l2++
		}
	}
	if l1 < 2 || l2 < 1 {
		t.Fatalf("%d L1 and %d L2 compactions, want ≥2 and ≥1: %+v", l1, l2, results)
	}
	if got := len(f.requests()); got != len(results) {
		t.Errorf("%d requests for %d compactions", got, len(results))
	}

	var folded bool
	for _, r := range f.requests() {
		if strings.Contains(r.User, "digest") {
			folded = true
			if !strings.Contains(r.User, "[L1 summary ") || !strings.Contains(r.User, "the agent worked on seq 1..") {
				t.Errorf("the fold prompt lacks the children's narratives:\n%s", r.User)
			}
			if strings.Contains(r.User, "tool_call c1") {
				t.Errorf("the fold prompt holds raw events:\n%s", r.User)
			}
		}
	}
	if !folded {
		t.Error("no fold prompt")
	}

	last := results[len(results)-1]
	var n tier.Node
	if err := db.View(func(s *store.Snapshot) (err error) { n, err = s.Node(session, last.Node); return err }); err != nil {
		t.Fatal(err)
	}
	if n.Summarizer != "openai:test-model" {
		t.Errorf("node summarizer %q", n.Summarizer)
	}
	if want := fmt.Sprintf("the agent worked on seq %d..%d.", n.From, n.To); n.Narrative != want {
		t.Errorf("node narrative %q, want %q", n.Narrative, want)
	}

	rc, err := db.Resume(session, store.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Source != "marker" {
		t.Fatalf("resume source %s (%s), want marker", rc.Source, rc.Reason)
	}
	text := string(rc.Text())
	for _, k := range []string{"rejected: " + keyRejected, "artifact: " + keyArtifact} {
		if !strings.Contains(text, k) {
			t.Errorf("resumed context lacks %q:\n%s", k, text)
		}
	}
}

// A model that drops the negative facts: the store refuses its summaries,
// the audit records why and by which summarizer, and resume falls back to
// a raw checkpoint that holds the facts.
func TestSummarizer_Compactor_Lossy(t *testing.T) {
	session, events := incidentEvents(t)
	f := newFake(t, func(_ int, r *request) reply {
		c := requiredClaims(t, r.User)
		c.Dispositions = nil
		return reply{Body: completion(summaryJSON("we explored some approaches", c), "stop")}
	})
	sum, _ := newSummarizer(t, f, openai.Config{})
	db := dbtest.Open(t, store.Options{NoSync: true})
	c := compactor(t, db, sum, 0, compaction.Policy{EveryTurns: 4})
	results, err := run(t, db, c, session, events)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var refused *compaction.Result
	for i := range results {
		if r := &results[i]; !r.Committed() && r.Refused != nil && strings.Contains(r.Refused.Reasons(), "retention:"+keyRejected) {
			refused = r
			break
		}
	}
	if refused == nil {
		t.Fatalf("no compaction refused for %s: %+v", keyRejected, results)
	}
	var audit []store.Refusal
	if err := db.View(func(s *store.Snapshot) error {
		return s.Refusals(session, func(r store.Refusal) error { audit = append(audit, r); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(audit, func(a store.Refusal) bool {
		return a.Summarizer == "openai:test-model" && a.From == refused.From && a.To == refused.To &&
			slices.ContainsFunc(a.Failures, func(f marker.Failure) bool { return f.Class == marker.ClassRetention && f.Item == keyRejected })
	}) {
		t.Errorf("audit %+v lacks the refusal of seq %d..%d for %s", audit, refused.From, refused.To, keyRejected)
	}
	rc, err := db.Resume(session, store.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Source != "checkpoint" || !strings.Contains(string(rc.Text()), keyRejected) {
		t.Errorf("resume: source %s, holds %s: %v", rc.Source, keyRejected, strings.Contains(string(rc.Text()), keyRejected))
	}
}

// On the compactor's retry the prompt says what the refused summary
// lacked; a model that heeds it gets its marker.
func TestSummarizer_Compactor_RetryTellsMissing(t *testing.T) {
	session, events := incidentEvents(t)
	f := newFake(t, func(_ int, r *request) reply {
		c := requiredClaims(t, r.User)
		if !strings.Contains(r.User, "REFUSED") {
			c.Dispositions, c.Artifacts = nil, nil
		}
		return reply{Body: completion(summaryJSON("the migration so far", c), "stop")}
	})
	sum, _ := newSummarizer(t, f, openai.Config{})
	db := dbtest.Open(t, store.Options{NoSync: true})
	c := compactor(t, db, sum, 1, compaction.Policy{EveryTurns: 4})
	results, err := run(t, db, c, session, events[:24]) // turns 1-4 and the start of turn 5
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(results) != 1 || !results[0].Committed() || results[0].Attempts != 2 {
		t.Fatalf("results %+v, want one commit on the second attempt", results)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if strings.Contains(reqs[0].User, "REFUSED") {
		t.Errorf("the first prompt speaks of a refusal:\n%s", reqs[0].User)
	}
	for _, want := range []string{"- retention:" + keyRejected + " (not claimed)", "- artifact:" + keyArtifact + " (not claimed)"} {
		if !strings.Contains(reqs[1].User, want) {
			t.Errorf("the retry prompt lacks %q:\n%s", want, reqs[1].User)
		}
	}
}

// Unusable answers are errors, never summaries: the compactor's Run fails
// naming the span, nothing is stored, and the model was asked again, told
// what was wrong, before the summarizer gave up.
func TestSummarizer_Compactor_Garbage(t *testing.T) {
	session, events := incidentEvents(t)
	bigNarrative := strings.Repeat("far too long ", 200) // ~650 tokens, budget 100
	for _, tc := range []struct {
		name   string
		rep    func(t *testing.T, r *request) reply
		reason openai.OutputReason
	}{
		{"prose instead of JSON", func(*testing.T, *request) reply {
			return reply{Body: completion("Sure! The agent migrated the database.", "stop")}
		}, openai.ReasonInvalidJSON},
		{"truncated JSON", func(t *testing.T, r *request) reply {
			s := summaryJSON("cut", requiredClaims(t, r.User))
			return reply{Body: completion(s[:len(s)/2], "stop")}
		}, openai.ReasonInvalidJSON},
		{"HTML page with status 200", func(*testing.T, *request) reply {
			return reply{Header: map[string]string{"Content-Type": "text/html"}, Body: "<!DOCTYPE html><html><body><h1>Welcome to nginx!</h1></body></html>"}
		}, openai.ReasonBadResponse},
		{"no choices", func(*testing.T, *request) reply {
			return reply{Body: `{"id":"x","object":"chat.completion","choices":[]}`}
		}, openai.ReasonNoChoices},
		{"finish_reason length", func(t *testing.T, r *request) reply {
			return reply{Body: completion(summaryJSON("ok", requiredClaims(t, r.User)), "length")}
		}, openai.ReasonTruncated},
		{"no narrative", func(t *testing.T, r *request) reply {
			return reply{Body: completion(`{"claims":{}}`, "stop")}
		}, openai.ReasonNoNarrative},
		{"narrative a number", func(*testing.T, *request) reply {
			return reply{Body: completion(`{"narrative":42,"claims":{}}`, "stop")}
		}, openai.ReasonWrongType},
		{"claims a list", func(*testing.T, *request) reply {
			return reply{Body: completion(`{"narrative":"x","claims":["c1"]}`, "stop")}
		}, openai.ReasonWrongType},
		{"unknown disposition state", func(*testing.T, *request) reply {
			return reply{Body: completion(`{"narrative":"x","claims":{"dispositions":[{"key":"k","state":"vetoed"}]}}`, "stop")}
		}, openai.ReasonWrongType},
		{"over budget", func(t *testing.T, r *request) reply {
			return reply{Body: completion(summaryJSON(bigNarrative, requiredClaims(t, r.User)), "stop")}
		}, openai.ReasonOverBudget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(_ int, r *request) reply { return tc.rep(t, r) })
			sum, waits := newSummarizer(t, f, openai.Config{Retries: 1})
			db := dbtest.Open(t, store.Options{NoSync: true})
			c := compactor(t, db, sum, 0, compaction.Policy{EveryEvents: 10, Budget: 100})
			rs, err := run(t, db, c, session, events[:10])
			if err != nil {
				t.Fatalf("Run: %v, want a refused compaction", err)
			}
			if len(rs) != 1 || rs[0].Refused == nil || len(rs[0].Refused.Failures) != 1 {
				t.Fatalf("results %+v, want one refused compaction", rs)
			}
			fail := rs[0].Refused.Failures[0]
			if fail.Class != marker.ClassOutput || fail.Item != string(tc.reason) || rs[0].From != 1 || rs[0].To != 10 {
				t.Errorf("refused %d..%d for %s, want seq 1..10 for output:%s", rs[0].From, rs[0].To, fail, tc.reason)
			}
			if !strings.Contains(fail.Detail, "after 2 attempts") || len(fail.Detail) > 520 {
				t.Errorf("detail %q does not name the attempts, or is not bounded", fail.Detail)
			}
			reqs := f.requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			if !strings.Contains(reqs[1].User, "Your previous answer could not be used: openai: unusable model output: "+string(tc.reason)) {
				t.Errorf("the second request does not say what was wrong:\n%s", reqs[1].User)
			}
			if w := waits.all(); len(w) != 1 || w[0] != 0 {
				t.Errorf("waits %v, want one of 0 (the server is fine, the answer was not)", w)
			}
			err = db.View(func(s *store.Snapshot) error {
				var markers, refusals int
				if err := s.Markers(session, func(marker.Marker) error { markers++; return nil }); err != nil {
					return err
				}
				if err := s.Refusals(session, func(r store.Refusal) error {
					refusals++
					if len(r.Failures) != 1 || r.Failures[0].Class != marker.ClassOutput || r.Summarizer != sum.Name() || r.Checkpoint == 0 {
						t.Errorf("audit %+v, want one output failure by openai with a checkpoint", r)
					}
					return nil
				}); err != nil {
					return err
				}
				roots, err := s.Roots(session)
				if markers != 0 || refusals != 1 || len(roots) != 0 {
					t.Errorf("%d markers, %d refusals, %d roots after an unusable answer; want 0, 1, 0", markers, refusals, len(roots))
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
