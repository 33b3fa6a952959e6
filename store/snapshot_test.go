package store_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/strata-go/strata/backend/boltfile"
	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/internal/memback"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestInfo_TailTokens: the tail's tokens and the refused span's, as Info
// reports them from the counters the state keeps, are those of the raw
// events rendered as a resumed context carries them — after appends, L1
// commits and refusals of sealed plans and of plans built by hand — and
// Verify, which recomputes the counters from the raw log, agrees at every
// step.
func TestInfo_TailTokens(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true})
	verify := func(step string) {
		t.Helper()
		rep, err := db.Verify(store.VerifyOptions{})
		if err != nil || !rep.OK() {
			t.Fatalf("%s: verify: %v %v", step, err, rep.Problems)
		}
		info, err := db.Info("s")
		if err != nil {
			t.Fatal(err)
		}
		var tail, refused int
		err = db.View(func(s *store.Snapshot) error {
			return s.Events("s", info.CompactedTo+1, info.Head, func(e tier.Event) error {
				tail += checkpoint.EventTextLen(&e)
				if e.Seq <= info.RefusedTo {
					refused += checkpoint.EventTextLen(&e)
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if info.TailTokens != tier.TokensOfBytes(tail) || info.RefusedTokens != tier.TokensOfBytes(refused) {
			t.Errorf("%s: Info says %d tokens in the tail, %d refused; the raw events %d and %d (%+v)",
				step, info.TailTokens, info.RefusedTokens, tier.TokensOfBytes(tail), tier.TokensOfBytes(refused), info)
		}
	}
	plan := func(to uint64) *store.Plan {
		t.Helper()
		p, err := db.PlanSpan("s", to, 100)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// byHand is p as a caller would build it: the store's seal is not
	// copied, so the commit computes the span from its raw events.
	byHand := func(p *store.Plan) *store.Plan {
		return &store.Plan{Session: p.Session, Kind: p.Kind, Depth: p.Depth, From: p.From, To: p.To, FrameVersion: p.FrameVersion,
			Events: p.Events, Required: p.Required, SpanHash: p.SpanHash, Budget: p.Budget}
	}
	commit := func(p *store.Plan, honest bool) {
		t.Helper()
		sum := store.Summary{Narrative: "n", Summarizer: "t"}
		if honest {
			sum.Claims = p.Required.Claims()
		}
		_, err := db.Commit(p, sum)
		if refused := errors.Is(err, marker.ErrMarkerInvalid); refused == honest || err != nil && !refused {
			t.Fatalf("commit of %d..%d (honest %v): %v", p.From, p.To, honest, err)
		}
	}

	mustAppend(t, db, "s",
		tier.Event{Kind: tier.KindUser, Text: "Migrate users.email to citext."},
		tier.Event{Kind: tier.KindConstraint, Key: "reversible", Text: "the migration must be reversible"},
		tier.Event{Kind: tier.KindAssistant, Text: strings.Repeat("Looking at the schema. ", 40)},
		tier.Event{Kind: tier.KindAssistant, Text: "Writing the rollback first.\nThen the forward migration."},
		tier.Event{Kind: tier.KindToolCall, ID: "c1", Name: "bash", Text: "psql -f up.sql --dry-run"},
		tier.Event{Kind: tier.KindToolResult, ID: "c1", Failed: true, Text: "lock timeout"},
	)
	verify("appended")
	commit(plan(3), true)
	verify("a sealed plan committed")
	commit(byHand(plan(4)), true)
	verify("a plan by hand committed")
	commit(byHand(plan(5)), false)
	verify("a plan by hand refused")
	commit(plan(6), false)
	verify("a sealed plan refused")
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindUser, Text: "Find another way."}, tier.Event{Kind: tier.KindAssistant, Text: "ALTER COLUMN ... TYPE citext"})
	verify("appended after the refusal")
	info, err := db.Info("s")
	if err != nil {
		t.Fatal(err)
	}
	if info.CompactedTo != 4 || info.RefusedTo != 6 || info.RefusedTokens == 0 || info.TailTokens <= info.RefusedTokens {
		t.Errorf("info %+v: want the prefix compacted to 4, a refused span to 6 inside a longer tail", info)
	}
}

// TestSnapshot_FormatVersion: a database in a bbolt file reports the
// file's format; one over a backend without a layout of its own reports 0.
func TestSnapshot_FormatVersion(t *testing.T) {
	dbtest.FileOnly(t)
	formatOf := func(db *store.DB) int {
		t.Helper()
		var v int
		if err := db.View(func(s *store.Snapshot) (err error) { v, err = s.FormatVersion(); return err }); err != nil {
			t.Fatal(err)
		}
		return v
	}
	db := dbtest.Open(t, store.Options{})
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindUser})
	if v := formatOf(db); v != boltfile.FormatVersion {
		t.Errorf("a bbolt file: FormatVersion = %d, want %d", v, boltfile.FormatVersion)
	}
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if v := formatOf(ro); v != boltfile.FormatVersion {
		t.Errorf("reopened read-only: FormatVersion = %d, want %d", v, boltfile.FormatVersion)
	}
	mem, err := store.New(memback.New(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if v := formatOf(mem); v != 0 {
		t.Errorf("in memory: FormatVersion = %d, want 0", v)
	}
}

// TestSnapshot_RefAndMarker: Ref finds the seqs an imported record's
// events were stored at, and nothing for a record or a session never
// stored; Marker reads one marker as Markers lists it, and a marker that
// is not there is ErrNotFound.
func TestSnapshot_RefAndMarker(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindUser, Text: "a", Ref: "msg-1"},
		tier.Event{Kind: tier.KindAssistant, Text: "b", Ref: "msg-2"},
		tier.Event{Kind: tier.KindAssistant, Text: "c", Ref: "msg-2"})
	p, err := db.PlanSpan("s", 3, 1000)
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(s *store.Snapshot) error {
		if span, ok, err := s.Ref("s", "msg-2"); err != nil || !ok || span != (store.RefSpan{First: 2, Last: 3}) {
			t.Errorf("Ref msg-2 = %+v %v %v, want seqs 2..3", span, ok, err)
		}
		if _, ok, err := s.Ref("s", "msg-9"); err != nil || ok {
			t.Errorf("Ref of a record never stored = %v %v", ok, err)
		}
		if _, ok, err := s.Ref("nobody", "msg-1"); err != nil || ok {
			t.Errorf("Ref in a session never stored = %v %v", ok, err)
		}
		var listed []marker.Marker
		if err := s.Markers("s", func(m marker.Marker) error { listed = append(listed, m); return nil }); err != nil {
			return err
		}
		m, err := s.Marker("s", res.Marker)
		if err != nil {
			return err
		}
		if len(listed) != 1 || !reflect.DeepEqual(m, listed[0]) || m.Node != res.Node.ID || m.Boundary != 3 {
			t.Errorf("Marker %d = %+v, Markers lists %+v", res.Marker, m, listed)
		}
		if _, err := s.Marker("s", res.Marker+1); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Marker of no marker = %v, want ErrNotFound", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
