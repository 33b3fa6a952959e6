package dbtest

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/strata-go/strata"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// ReplayIncident replays the seed's incident (strata.IncidentJSONL) into
// session as an agent would: ReplayEvents of IncidentEvents.
func ReplayIncident(t testing.TB, db *store.DB, session string, sum compaction.Summarizer) {
	t.Helper()
	ReplayEvents(t, db, session, sum, IncidentEvents(t))
}

// IncidentEvents returns the events of the seed's incident
// (strata.IncidentJSONL), in order.
func IncidentEvents(t testing.TB) []tier.Event {
	t.Helper()
	rd := tier.NewReader(bytes.NewReader(strata.IncidentJSONL), "incident", tier.Limits{})
	var evs []tier.Event
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			return evs
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, rec.Event)
	}
}

// ReplayEvents appends evs to session as an agent would: each event
// appended, then sum's compactor run with an L1 node every 2 turns and
// folds of 2.
func ReplayEvents(t testing.TB, db *store.DB, session string, sum compaction.Summarizer, evs []tier.Event) {
	t.Helper()
	comp, err := compaction.NewCompactor(db, compaction.Options{Summarizer: sum, Policy: compaction.Policy{EveryTurns: 2, Fold: 2}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if _, err := db.Append(session, e); err != nil {
			t.Fatal(err)
		}
		if _, err := comp.Run(context.Background(), session); err != nil {
			t.Fatal(err)
		}
	}
}
