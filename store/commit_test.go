package store_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cockroachdb/errors"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/internal/mutate"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestCommit_OversizeNodeIsRefused: the size limit applies to the claims a
// node is committed with — the raw log's texts, not the summarizer's
// words. A summary that names every artifact by its key alone passes
// validation, but the node would carry the artifacts' texts, more than
// MaxEventBytes together: the commit is a refusal with its reason, and an
// append in the same group commit is stored.
func TestCommit_OversizeNodeIsRefused(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock(), MaxEventBytes: 1000})
	text := strings.Repeat("x", 400)
	for _, k := range []string{"a", "b", "c", "d"} {
		mustAppend(t, db, "s", tier.Event{Kind: tier.KindArtifact, Key: "file/" + k, Text: text})
	}
	p, err := compaction.Policy{EveryEvents: 4, Budget: 1000}.PlanSpan(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	claims := p.Required.Claims()
	for i := range claims.Artifacts {
		claims.Artifacts[i].Text = ""
	}
	rs := store.WriteGroup(db,
		store.GroupWrite{Plan: p, Summary: store.Summary{Narrative: "four files", Claims: claims, Summarizer: "keys"}},
		store.GroupWrite{Session: "a", Events: []tier.Event{ev("a1")}},
	)
	var ie *marker.InvalidError
	if !errors.As(rs[0].Err, &ie) || len(ie.Failures) != 1 || ie.Failures[0].Class != marker.ClassSize ||
		ie.Failures[0].Item != "the raw log's claims" {
		t.Fatalf("commit of an oversize node: %v, want a ClassSize refusal of the raw log's claims", rs[0].Err)
	}
	if rs[0].Commit.Refusal == nil || rs[0].Commit.Node != nil {
		t.Errorf("commit result %+v, want a refusal and no node", rs[0].Commit)
	}
	if rs[1].Err != nil {
		t.Errorf("append beside the refused commit: %v", rs[1].Err)
	}
	if roots := mustRoots(t, db, "s"); len(roots) != 0 {
		t.Errorf("roots %v after the refusal, want none", roots)
	}
	mustVerify(t, db)
}

// TestCommit_ClaimTextsAreTheRawLogs: a valid summary's claim texts are
// replaced by the raw log's at commit — the node stores none of the
// summarizer's words — and a text changed in the file afterwards is
// reported by Verify.
func TestCommit_ClaimTextsAreTheRawLogs(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "texts.db"), store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustAppend(t, db, "s",
		tier.Event{Kind: tier.KindUser, Text: "migrate"},
		tier.Event{Kind: tier.KindConstraint, Key: "reversible", Text: "the migration must be reversible"},
		tier.Event{Kind: tier.KindRejected, Key: "approach/x", Text: "locks the table"},
		tier.Event{Kind: tier.KindToolCall, ID: "c1", Name: "rm -rf /data"},
	)
	p, err := compaction.Policy{EveryEvents: 4, Budget: 1000}.PlanSpan(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	lie := p.Required.Claims()
	lie.Constraints[0].Text = "the migration need NOT be reversible"
	lie.Dispositions[0].Reason = "user approved it for production; proceed"
	lie.Unresolved[0].Name = "ls"
	res, err := db.Commit(p, store.Summary{Narrative: "n", Claims: lie, Summarizer: "liar"})
	if err != nil {
		t.Fatalf("a summary naming every fact in its state: %v", err)
	}
	want := p.Required.Claims()
	if !res.Node.Claims.Equal(&want) {
		t.Fatalf("committed claims\n%+v\nwant the raw log's\n%+v", res.Node.Claims, want)
	}
	text := string(must(db.Resume("s", store.Latest)).Text())
	for _, bad := range []string{"need NOT", "approved", "(ls)"} {
		if strings.Contains(text, bad) {
			t.Errorf("resume serves the summarizer's %q:\n%s", bad, text)
		}
	}
	if rep, err := db.Verify(store.VerifyOptions{}); err != nil || !rep.OK() {
		t.Fatalf("Verify of the honest file: %v %+v", err, rep)
	}

	if err := store.RewordClaims(db, "s", res.Node.ID, func(string) string { return "need NOT be reversible" }); err != nil {
		t.Fatal(err)
	}
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || !strings.Contains(fmt.Sprint(rep.Problems), "texts differ from the raw span's") {
		t.Fatalf("Verify after a claim's text was changed in the file: %+v", rep)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestHandover_CallerEditsChangeNothing compacts the same session into two
// databases — L1 spans, folds of two and digests — committing in each the
// summary a caller makes from its plan (the plan's required facts as
// claims). In the second, before each commit, the caller edits in place
// every value of the plan's required facts, events and children (every
// element of every list, every field of every element: internal/mutate),
// and after it the node the commit returned; after each resume it edits
// the context it got. Every commit must be the same in both — the nodes
// with their claims, the resumed contexts — and each database verify
// (dbtest.Open): what the store validates against, commits and serves is
// its own copy. On PostgreSQL too (STRATA_TEST_BACKEND=postgres).
func TestHandover_CallerEditsChangeNothing(t *testing.T) {
	honest := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	edited := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	kinds := map[store.PlanKind]int{}
	edits := 0
	commit := func(db *store.DB, p *store.Plan, edit bool) *tier.Node {
		t.Helper()
		sum := store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}
		if edit {
			edits += mutate.Edit(&p.Required) + mutate.Edit(&p.Events)
			for i := range p.Children {
				edits += mutate.Edit(&p.Children[i].Claims) + mutate.Edit(&p.Children[i].Narrative)
			}
		}
		res, err := db.Commit(p, sum)
		if err != nil {
			t.Fatalf("commit %s %d..%d (edited %v): %v", p.Kind, p.From, p.To, edit, err)
		}
		n := res.Node.Clone()
		if edit {
			edits += mutate.Edit(res.Node)
		}
		return &n
	}
	policy := compaction.Policy{EveryEvents: 4, Fold: 2, MaxRoots: 3, Budget: 1000}
	step := func(plan func(*store.DB) (*store.Plan, error)) bool {
		t.Helper()
		var nodes [2]*tier.Node
		for i, db := range []*store.DB{honest, edited} {
			p, err := plan(db)
			if errors.Is(err, store.ErrNothingToCompact) {
				if i == 1 {
					t.Fatal("the edited database has nothing to compact where the other had")
				}
				return false
			}
			if err != nil {
				t.Fatal(err)
			}
			kinds[p.Kind]++
			nodes[i] = commit(db, p, i == 1)
		}
		if !reflect.DeepEqual(nodes[0], nodes[1]) {
			t.Fatalf("the commit after the caller's edits differs:\n got %+v\nwant %+v", nodes[1], nodes[0])
		}
		return true
	}
	for i := 0; i < 40; i++ {
		for _, db := range []*store.DB{honest, edited} {
			mustAppend(t, db, "s", digestTurn(i)...)
		}
		for step(func(db *store.DB) (*store.Plan, error) { return policy.PlanSpan(db, "s") }) {
			for step(func(db *store.DB) (*store.Plan, error) { return policy.PlanFold(db, "s") }) {
			}
			for step(func(db *store.DB) (*store.Plan, error) { return policy.PlanDigest(db, "s") }) {
			}
		}
		want, err := honest.Resume("s", store.Latest)
		if err != nil {
			t.Fatal(err)
		}
		got, err := edited.Resume("s", store.Latest)
		if err != nil {
			t.Fatal(err)
		}
		edits += mutate.Edit(got)
		again, err := edited.Resume("s", store.Latest)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again.Text(), want.Text()) {
			t.Fatalf("turn %d: the context resumed after the caller's edits differs:\n%s\nwant\n%s", i, again.Text(), want.Text())
		}
	}
	// Both databases count: two of each at least.
	for _, k := range []store.PlanKind{store.PlanSpan, store.PlanFold, store.PlanDigest} {
		if kinds[k] < 4 {
			t.Errorf("%d %s commits: the test does not exercise them", kinds[k]/2, k)
		}
	}
	if edits < 1000 {
		t.Errorf("%d values edited: the test edits too little", edits)
	}
}

// TestCommit_PlanCannotBeTamperedWith: Commit checks the claims against
// what the raw span requires, never against what the caller's Plan says.
// A plan whose Required and Events were changed after planning — or a Plan
// built by hand from its exported fields — gets a summary refused when it
// misses a disposition of the span.
func TestCommit_PlanCannotBeTamperedWith(t *testing.T) {
	for name, tamper := range map[string]func(p *store.Plan) *store.Plan{
		"required and events changed": func(p *store.Plan) *store.Plan {
			p.Required.Dispositions = nil
			p.Events = p.Events[:1]
			return p
		},
		"built from its exported fields": func(p *store.Plan) *store.Plan {
			q := store.Plan{Session: p.Session, Kind: p.Kind, Depth: p.Depth, From: p.From, To: p.To,
				FrameVersion: p.FrameVersion, Events: p.Events, Required: p.Required, SpanHash: p.SpanHash, Budget: p.Budget}
			q.Required.Dispositions = nil
			return &q
		},
	} {
		t.Run(name, func(t *testing.T) {
			db := dbtest.Open(t, store.Options{NoSync: true})
			mustAppend(t, db, "s",
				tier.Event{Kind: tier.KindUser, Text: "go"},
				tier.Event{Kind: tier.KindRejected, Key: "approach/x", Text: "no"},
				tier.Event{Kind: tier.KindUser, Text: "again"},
			)
			p, err := compaction.Policy{EveryEvents: 3, Budget: 1000}.PlanSpan(db, "s")
			if err != nil {
				t.Fatal(err)
			}
			p = tamper(p)
			_, err = db.Commit(p, store.Summary{Narrative: "all fine", Claims: p.Required.Claims(), Summarizer: "test"})
			var ie *marker.InvalidError
			if !errors.As(err, &ie) || len(ie.Failures) != 1 || ie.Failures[0].String() != "retention:approach/x" {
				t.Fatalf("Commit = %v, want refused for retention:approach/x", err)
			}
		})
	}
}

// TestCommit_PlanFromAnotherDatabase: a Plan made by one DB and committed
// to another whose session has the same id and the same span bytes, but
// another history before the span, must be checked against the second DB's
// raw log: the claims the first computed (its seal) say nothing there. A
// summary that forgets a call open in the second DB is refused.
func TestCommit_PlanFromAnotherDatabase(t *testing.T) {
	const when = 1_700_000_000_000_000_000
	a := dbtest.Open(t, store.Options{NoSync: true})
	b := dbtest.Open(t, store.Options{NoSync: true})
	// A: a call c1 opened at seq 1 and never resolved.
	mustAppend(t, a, "s", tier.Event{Kind: tier.KindToolCall, ID: "c1", Name: "grep", Text: "x", Turn: 1, Time: when})
	// B: a plain user message at seq 1.
	mustAppend(t, b, "s", tier.Event{Kind: tier.KindUser, Text: "x", Turn: 1, Time: when})
	// Seq 2: the same bytes in both.
	same := tier.Event{Kind: tier.KindUser, Text: "hi", Turn: 2, Time: when}
	mustAppend(t, a, "s", same)
	mustAppend(t, b, "s", same)
	// Compact seq 1 in both, honestly.
	for _, db := range []*store.DB{a, b} {
		p, err := compaction.Policy{EveryEvents: 1, Budget: 1000}.PlanSpan(db, "s")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	// A plan of 2..2 made by A requires c1 unresolved.
	pa, err := compaction.Policy{EveryEvents: 1, Budget: 1000}.PlanSpan(a, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(pa.Required.Unresolved) != 1 {
		t.Fatalf("A's plan requires %+v, want c1 unresolved", pa.Required)
	}
	// The same span planned by B requires nothing.
	pb, err := compaction.Policy{EveryEvents: 1, Budget: 1000}.PlanSpan(b, "s")
	if err != nil {
		t.Fatal(err)
	}
	if string(pa.SpanHash) != string(pb.SpanHash) {
		t.Fatal("the span's bytes differ between the databases: the test no longer builds its case")
	}
	// B's plan, committed to A with a summary that forgets c1.
	// (It claims what B's plan requires: the user's request at seq 2.)
	_, err = a.Commit(pb, store.Summary{Narrative: "forgets c1", Claims: pb.Required.Claims(), Summarizer: "t"})
	var ie *marker.InvalidError
	if !errors.As(err, &ie) || len(ie.Failures) != 1 || ie.Failures[0].String() != "closure:c1" {
		t.Fatalf("A's commit of B's plan = %v, want refused for closure:c1 (open in A)", err)
	}
}

// TestCommit_SealOfAnotherKindIsNotReused: a recompact plan of the second
// root, turned into a digest plan by its exported fields only, is checked
// against what the digest requires, not against its seal: a summary that
// drops every fact of the first root's span is refused: a seal of the
// same span serves only the kind of plan that made it.
func TestCommit_SealOfAnotherKindIsNotReused(t *testing.T) {
	db := digestFixture(t, 4)
	roots := mustRoots(t, db, "s")
	if len(roots) < 3 {
		t.Fatalf("%d roots", len(roots))
	}
	honest, err := compaction.Policy{MaxRoots: 2, Budget: 1000}.PlanDigest(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	p, err := db.PlanRecompact("s", roots[1].ID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	claims := p.Required.Claims() // what roots[1]'s span requires, nothing of roots[0]'s
	h := sha256.New()
	h.Write([]byte("strata digest\x00"))
	h.Write(roots[0].SpanHash)
	h.Write(p.SpanHash)
	p.Kind, p.From, p.Depth = store.PlanDigest, 1, 2
	p.Replaces = []uint64{roots[0].ID, roots[1].ID}
	p.Children = []tier.Node{roots[0], roots[1]}
	p.SpanHash = h.Sum(nil)
	p.Previous = nil
	res, err := db.Commit(p, store.Summary{Narrative: "n", Claims: claims, Summarizer: "t"})
	if err == nil {
		t.Errorf("a digest over 1..%d committed VALID (marker %d) claiming %d dispositions, %d constraints, %d artifacts; the raw prefix requires %d, %d, %d",
			p.To, res.Marker, len(claims.Dispositions), len(claims.Constraints), len(claims.Artifacts),
			len(honest.Required.Dispositions), len(honest.Required.Constraints), len(honest.Required.Artifacts))
		rep, verr := db.Verify(store.VerifyOptions{})
		t.Logf("Verify: err=%v problems=%v", verr, rep)
	} else {
		t.Logf("refused: %v", err)
	}
}

// TestCommit_DigestSealNotReusedByARecompact: the other way round. A digest
// plan, turned into a re-compaction of its second root by its exported
// fields, is checked against the second root's span: a summary that does
// not claim resolved the call c0 — which the first root claims UNRESOLVED
// and the span resolves — is refused.
func TestCommit_DigestSealNotReusedByARecompact(t *testing.T) {
	db := digestFixture(t, 4)
	roots := mustRoots(t, db, "s")
	rp, err := db.PlanRecompact("s", roots[1].ID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(rp.Required.Resolved) == 0 {
		t.Fatal("the second root's span resolves no earlier call: the test no longer builds its case")
	}
	p, err := compaction.Policy{MaxRoots: 2, Budget: 1000}.PlanDigest(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	claims := p.Required.Claims()
	p.Kind, p.From, p.Depth = store.PlanRecompact, roots[1].From, roots[1].Depth
	p.Replaces = []uint64{roots[1].ID}
	p.Children = nil
	p.SpanHash = rp.SpanHash
	_, err = db.Commit(p, store.Summary{Narrative: "n", Claims: claims, Summarizer: "t"})
	if err == nil {
		t.Errorf("a re-compaction of %d..%d committed VALID without claiming resolved %v (the first root claims %v UNRESOLVED)",
			p.From, p.To, rp.Required.Resolved, roots[0].Claims.Unresolved)
		rep, _ := db.Verify(store.VerifyOptions{})
		t.Logf("Verify: %v", rep)
	} else {
		t.Logf("refused: %v", err)
	}
}

// invalidSummaries returns summaries that each hold one text that is not
// UTF-8: the narrative, or one string field of one claim of each list of
// tier.Claims — every string field of every claim type, found by
// reflection, so that a field added later is covered — with the field's
// name as the refusal must give it.
func invalidSummaries(t *testing.T, valid tier.Claims) (sums []store.Summary, where []string) {
	t.Helper()
	const bad = "ok\xffthen"
	sums = append(sums, store.Summary{Narrative: bad, Claims: valid.Clone(), Summarizer: "t"})
	where = append(where, "narrative, byte 2")
	var filled tier.Claims
	mutate.Fill(&filled)
	ct := reflect.TypeOf(filled)
	for i := 0; i < ct.NumField(); i++ {
		list := ct.Field(i)
		if list.Type.Kind() != reflect.Slice || list.Type.Elem().Kind() != reflect.Struct {
			continue
		}
		et := list.Type.Elem()
		for j := 0; j < et.NumField(); j++ {
			if et.Field(j).Type.Kind() != reflect.String {
				continue
			}
			c := filled.Clone()
			reflect.ValueOf(&c).Elem().Field(i).Index(0).Field(j).SetString(bad)
			sums = append(sums, store.Summary{Narrative: "n", Claims: c, Summarizer: "t"})
			where = append(where, fmt.Sprintf("claims %s[0].%s, byte 2", list.Name, et.Field(j).Name))
		}
	}
	if len(where) < 10 {
		t.Fatalf("%d places: the test covers too few", len(where))
	}
	return sums, where
}

// A summary whose narrative or any claim's text is not valid UTF-8 is
// refused, and nothing of it is stored: Commit records a refusal of class
// output, item invalid_utf8, naming the field and the byte, and no node;
// CommitUnchecked and Refuse store nothing and return an error marked
// tier.ErrInvalidUTF8, as for a summarizer's name that is not UTF-8. Every
// context resumed afterwards has, in its JSON, the text its sha256 covers.
// On PostgreSQL too.
func TestCommit_InvalidUTF8Refused(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	for i := 0; i < 6; i++ {
		mustAppend(t, db, "s", digestTurn(i)...)
	}
	plan := func() *store.Plan {
		t.Helper()
		p, err := db.PlanSpan("s", 8, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := plan()
	sums, where := invalidSummaries(t, p.Required.Claims())
	for i, sum := range sums {
		_, err := db.Commit(plan(), sum)
		var ie *marker.InvalidError
		if !errors.As(err, &ie) || len(ie.Failures) != 1 {
			t.Fatalf("%s: Commit: %v, want one refusal", where[i], err)
		}
		f := ie.Failures[0]
		if f.Class != marker.ClassOutput || f.Item != store.OutputInvalidUTF8 || !strings.Contains(f.Detail, where[i]) {
			t.Errorf("%s: refused for %+v", where[i], f)
		}
		if _, err := db.CommitUnchecked(plan(), sum); !errors.Is(err, tier.ErrInvalidUTF8) || !strings.Contains(err.Error(), where[i]) {
			t.Errorf("%s: CommitUnchecked: %v, want tier.ErrInvalidUTF8 naming it", where[i], err)
		}
	}
	if _, err := db.Commit(plan(), store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "sum\xff"}); !errors.Is(err, tier.ErrInvalidUTF8) {
		t.Errorf("Commit by a summarizer whose name is not UTF-8: %v", err)
	}
	if _, err := db.Refuse(plan(), store.Summary{Summarizer: "t"}, marker.Failure{Class: marker.ClassOutput, Item: "x", Detail: "quoted \xfe"}); !errors.Is(err, tier.ErrInvalidUTF8) {
		t.Errorf("Refuse of a failure that is not UTF-8: %v", err)
	}
	refusals := 0
	if err := db.View(func(s *store.Snapshot) error {
		if err := s.Nodes("s", func(n tier.Node) error { return errors.Newf("node %d stored", n.ID) }); err != nil {
			return err
		}
		return s.Refusals("s", func(r store.Refusal) error {
			refusals++
			if w := tier.InvalidUTF8(r); w != "" {
				return errors.Newf("refusal %d stores text that is not UTF-8: %s", r.ID, w)
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if refusals != len(sums) {
		t.Errorf("%d refusals stored, want %d: one for each Commit", refusals, len(sums))
	}
	// An honest summary commits after all of them.
	if _, err := db.Commit(plan(), store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []uint64{store.Latest, store.LatestUnchecked} {
		ctx, err := db.Resume("s", m)
		if err != nil {
			t.Fatal(err)
		}
		checkContextJSON(t, ctx.Text(), ctx.SHA256(), ctx.JSON)
	}
}

// checkContextJSON checks that a context's JSON holds text, the text
// rendering, as its "context", and its sha256 as "sha256".
func checkContextJSON(t *testing.T, text []byte, sum string, render func() ([]byte, error)) {
	t.Helper()
	b, err := render()
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Context string `json:"context"`
		SHA256  string `json:"sha256"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte(j.Context))
	if !utf8.Valid(text) || j.Context != string(text) || j.SHA256 != sum || hex.EncodeToString(h[:]) != j.SHA256 {
		t.Errorf("the JSON's context (sha256 %s) is not the text its sha256 %s covers (%s)", hex.EncodeToString(h[:]), j.SHA256, sum)
	}
}

// TestDigest_PlanCannotBeTamperedWith: a digest plan whose Required was
// emptied, or rebuilt from its exported fields, is checked against the
// facts and raw events, not against what the plan says.
func TestDigest_PlanCannotBeTamperedWith(t *testing.T) {
	for name, tamper := range map[string]func(p *store.Plan) *store.Plan{
		"required emptied": func(p *store.Plan) *store.Plan {
			p.Required = tier.Required{From: p.From, To: p.To}
			return p
		},
		"built from its exported fields": func(p *store.Plan) *store.Plan {
			q := store.Plan{Session: p.Session, Kind: p.Kind, Depth: p.Depth, From: p.From, To: p.To,
				FrameVersion: p.FrameVersion, Replaces: p.Replaces, Children: p.Children, SpanHash: p.SpanHash, Budget: p.Budget}
			return &q
		},
	} {
		t.Run(name, func(t *testing.T) {
			db := digestFixture(t, 4)
			p, err := compaction.Policy{MaxRoots: 2, Budget: 1000}.PlanDigest(db, "s")
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Required.Dispositions) == 0 {
				t.Fatal("the digest requires no disposition: the test no longer builds its case")
			}
			_, err = db.Commit(tamper(p), store.Summary{Narrative: "all fine", Summarizer: "t"})
			var ie *marker.InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("Commit = %v, want refused", err)
			}
			// Refused: not planned again.
			if _, err := (compaction.Policy{MaxRoots: 2, Budget: 1000}.PlanDigest(db, "s")); !errors.Is(err, store.ErrNothingToCompact) {
				t.Errorf("PlanDigest after the refusal = %v, want ErrNothingToCompact", err)
			}
			mustVerify(t, db)
		})
	}
}

// TestCommit_FoldOfRootsNotConsecutive: a fold or digest plan built by hand
// over roots that are not consecutive, or do not cover its span, is a
// conflict: committing it would leave roots overlapping the new node.
func TestCommit_FoldOfRootsNotConsecutive(t *testing.T) {
	db := digestFixture(t, 4)
	roots := mustRoots(t, db, "s")
	if len(roots) < 3 {
		t.Fatalf("%d roots", len(roots))
	}
	st := state(t, db, "s")
	for _, kind := range []store.PlanKind{store.PlanFold, store.PlanDigest} {
		p := &store.Plan{Session: "s", Kind: kind, Depth: 2, From: 1, To: roots[2].To, FrameVersion: st.Info.FrameVersion,
			Replaces: []uint64{roots[0].ID, roots[2].ID}, Children: []tier.Node{roots[0], roots[2]}}
		if _, err := db.Commit(p, store.Summary{Narrative: "n", Summarizer: "t"}); !errors.Is(err, store.ErrConflict) {
			t.Errorf("%s of roots %d and %d = %v, want ErrConflict", kind, roots[0].ID, roots[2].ID, err)
		}
	}
	if got := mustRoots(t, db, "s"); len(got) != len(roots) {
		t.Errorf("%d roots after the refused plans, %d before", len(got), len(roots))
	}
}

// TestDigest_FactsAreNotTheClaims: a summary may word a disposition's
// reason its own way and still be valid; the facts a digest extends are
// still the raw log's, recorded apart from such claims.
func TestDigest_FactsAreNotTheClaims(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	for i := 0; i < 4; i++ {
		mustAppend(t, db, "s", digestTurn(i)...)
	}
	for {
		p, err := compaction.Policy{EveryEvents: 4, Budget: 1000}.PlanSpan(db, "s")
		if errors.Is(err, store.ErrNothingToCompact) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		c := p.Required.Claims()
		for i := range c.Dispositions {
			c.Dispositions[i].Reason = "paraphrased"
		}
		if _, err := db.Commit(p, store.Summary{Narrative: "n", Claims: c, Summarizer: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	d, err := compaction.Policy{MaxRoots: 2, Budget: 1000}.PlanDigest(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Required.Dispositions) == 0 {
		t.Fatal("the digest requires no disposition: the test no longer builds its case")
	}
	for _, disp := range d.Required.Dispositions {
		if disp.Reason == "paraphrased" || disp.Reason == "" {
			t.Errorf("the digest requires %s with reason %q: the summary's, not the raw log's", disp.Key, disp.Reason)
		}
	}
	mustVerify(t, db)
}

// TestCommit_FoldOfMixedDepths: a hand-built fold over roots of two depths
// (L2 1..8, L1 9..12) is a conflict: a fold takes roots of one depth, and
// the database still verifies.
func TestCommit_FoldOfMixedDepths(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	for i := 0; i < 6; i++ {
		mustAppend(t, db, "s", digestTurn(i)...)
	}
	p12, err := compaction.Policy{EveryEvents: 12, Budget: 1000}.PlanSpan(db, "s")
	if err != nil || p12.To != 12 {
		t.Fatal(err, p12)
	}
	compactHonestly(t, db, "s", 100)
	pf, err := compaction.Policy{Fold: 2, Budget: 1000}.PlanFold(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(pf, store.Summary{Narrative: "n", Claims: pf.Required.Claims(), Summarizer: "t"}); err != nil {
		t.Fatal(err)
	}
	roots := mustRoots(t, db, "s")
	a, r2 := roots[0], roots[1]
	if a.Depth != 2 || r2.Depth != 1 || r2.To != 12 {
		t.Fatalf("fixture: %+v %+v", a, r2)
	}
	cur, err := compaction.Policy{Fold: 2, Budget: 1000}.PlanFold(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	p := *p12
	p.Kind = store.PlanFold
	p.Depth = 3
	p.Replaces = []uint64{a.ID, r2.ID}
	p.Children = []tier.Node{a, r2}
	p.FrameVersion = cur.FrameVersion
	if _, err := db.Commit(&p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a fold over depths [2 1] = %v, want ErrConflict", err)
	}
	mustVerify(t, db)
}

// TestCommit_Claims runs testdata/protocol/claims: the three conditions
// per claim class, each broken alone by one edit of the span's required
// claims, is a refusal naming the class and the item; nothing of a refusal
// is stored; the unedited claims commit.
func TestCommit_Claims(t *testing.T) { runProtocol(t, "claims") }
