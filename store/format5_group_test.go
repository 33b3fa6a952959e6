package store_test

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

func run8(prefix string) []tier.Event {
	out := make([]tier.Event, 8)
	for i := range out {
		out[i] = ev(prefix)
	}
	out[0].Kind = tier.KindUser
	for i := 1; i < 8; i++ {
		out[i].Kind = tier.KindAssistant
	}
	return out
}

// TestFormat5_GroupMix: in one group commit, two new sessions warm, a cold
// one warms then gets a commit, a cold one gets a commit while cold, a new
// one starts with a run.
func TestFormat5_GroupMix(t *testing.T) {
	path := filepath.Join(t.TempDir(), "strata.db")
	db := openFormat(t, path, 5, 100)
	mustAppend(t, db, "c", run8("c")...)
	mustAppend(t, db, "d", run8("d")...)
	pc, err := db.PlanSpan("c", store.SpanPolicy{Events: 4}, 100000)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := db.PlanSpan("d", store.SpanPolicy{Events: 4}, 100000)
	if err != nil {
		t.Fatal(err)
	}
	sum := func(p *store.Plan) store.Summary {
		return store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}
	}
	res := store.WriteGroup(db,
		store.GroupWrite{Session: "n1", Events: []tier.Event{ev("n1")}},
		store.GroupWrite{Session: "n2", Events: []tier.Event{ev("n2")}},
		store.GroupWrite{Session: "c", Events: []tier.Event{ev("c9")}},
		store.GroupWrite{Plan: pc, Summary: sum(pc)},
		store.GroupWrite{Plan: pd, Summary: sum(pd)},
		store.GroupWrite{Session: "big", Events: run8("big")},
		store.GroupWrite{Session: "big", Events: []tier.Event{ev("big9")}},
		store.GroupWrite{Session: "n1", Events: []tier.Event{ev("n1b")}},
	)
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("write %d: %v", i, r.Err)
		}
	}
	nums := map[uint32]string{}
	for _, id := range []string{"n1", "n2", "c", "big"} {
		c := readCold5AfterClose(t, db, path, id)
		if !c.numbered {
			t.Errorf("%s not numbered", id)
		}
		if o, ok := nums[c.num]; ok {
			t.Errorf("%s and %s share number %d", o, id, c.num)
		}
		nums[c.num] = id
		db = openFormat(t, path, 5, 100)
	}
	if c := readCold5AfterClose(t, db, path, "d"); c.numbered {
		t.Errorf("d numbered")
	}
	db = openFormat(t, path, 5, 100)
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil || !rep.OK() {
		t.Errorf("Verify: %v %v", rep.Problems, err)
	}
	if _, err := db.Stats(); err != nil {
		t.Error(err)
	}
	mustClose(t, db)
	viewBolt(t, path, func(tx *bolt.Tx) error {
		t.Logf("next %d", binary.BigEndian.Uint32(tx.Bucket([]byte("meta")).Get([]byte("next"))))
		return nil
	})
}

func readCold5AfterClose(t *testing.T, db *store.DB, path, id string) cold5 {
	t.Helper()
	mustClose(t, db)
	return readCold5(t, path, id)
}

// TestFormat5_GroupCommitThenWarmFold: commit on a cold session, then it
// warms, and a fold runs in the same transaction; new sessions warm too.
func TestFormat5_GroupCommitThenWarmFold(t *testing.T) {
	path := filepath.Join(t.TempDir(), "strata.db")
	db := openFormat(t, path, 5, 2)
	mustAppend(t, db, "c", run8("c")...)
	pc, err := db.PlanSpan("c", store.SpanPolicy{Events: 4}, 100000)
	if err != nil {
		t.Fatal(err)
	}
	res := store.WriteGroup(db,
		store.GroupWrite{Plan: pc, Summary: store.Summary{Narrative: "n", Claims: pc.Required.Claims(), Summarizer: "t"}},
		store.GroupWrite{Session: "c", Events: []tier.Event{ev("c9")}},
		store.GroupWrite{Session: "n1", Events: []tier.Event{ev("n1")}},
		store.GroupWrite{Session: "n2", Events: []tier.Event{ev("n2"), ev("n2b")}},
		store.GroupWrite{Session: "c", Events: []tier.Event{ev("c10")}},
	)
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("write %d: %v", i, r.Err)
		}
	}
	_, entries, _, err := store.JournalState(db)
	if err != nil || entries != 0 {
		t.Errorf("journal not folded: %d entries, %v", entries, err)
	}
	for _, reopen := range []bool{false, true} {
		if reopen {
			mustClose(t, db)
			db = openFormat(t, path, 5, 2)
		}
		rep, err := db.Verify(store.VerifyOptions{})
		if err != nil || !rep.OK() {
			t.Errorf("Verify: %v %v", rep.Problems, err)
		}
		if st, err := db.Stats(); err != nil || st.Total.Events != 10+1+2 {
			t.Errorf("Stats: %+v %v", st.Total.Events, err)
		}
	}
	mustClose(t, db)
}
