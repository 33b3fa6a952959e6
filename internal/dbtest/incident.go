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
// session as an agent would: each event appended, then sum's compactor run
// with an L1 node every 2 turns and folds of 2.
func ReplayIncident(t testing.TB, db *store.DB, session string, sum compaction.Summarizer) {
	t.Helper()
	comp, err := compaction.NewCompactor(db, compaction.Options{Summarizer: sum, Policy: compaction.Policy{EveryTurns: 2, Fold: 2}})
	if err != nil {
		t.Fatal(err)
	}
	rd := tier.NewReader(bytes.NewReader(strata.IncidentJSONL), "incident", tier.Limits{})
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Append(session, rec.Event); err != nil {
			t.Fatal(err)
		}
		if _, err := comp.Run(context.Background(), session); err != nil {
			t.Fatal(err)
		}
	}
}
