package store_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/internal/mutate"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

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
