package store_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// Snapshot.Stats counts what DB.Stats counts, and Snapshot.Size is the
// length of the copy WriteTo writes.
func TestSnapshot_StatsSize(t *testing.T) {
	dbtest.FileOnly(t)
	t.Parallel()
	db := dbtest.Open(t, store.Options{NoSync: true})
	check := func(sessions int) {
		t.Helper()
		want, err := db.Stats()
		if err != nil {
			t.Fatal(err)
		}
		var got store.Stats
		var size, n int64
		var copy bytes.Buffer
		if err := db.View(func(s *store.Snapshot) error {
			got, err = s.Stats()
			if err != nil {
				return err
			}
			size = s.Size()
			n, err = s.WriteTo(&copy)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got.Sessions == nil || len(got.Sessions) != sessions {
			t.Errorf("Snapshot.Stats: %d sessions (nil: %t), want %d", len(got.Sessions), got.Sessions == nil, sessions)
		}
		if want.Sessions == nil {
			want.Sessions = []store.SessionStats{}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Snapshot.Stats %+v\nDB.Stats %+v", got, want)
		}
		if size != n || int64(copy.Len()) != size || size == 0 {
			t.Errorf("Size %d, WriteTo wrote %d (%d bytes)", size, n, copy.Len())
		}
	}
	check(0)
	for _, s := range []string{"b", "a"} {
		if _, err := db.Append(s, tier.Event{Kind: tier.KindUser, Text: "hi"},
			tier.Event{Kind: tier.KindRejected, Key: "approach/x", Text: "no"}); err != nil {
			t.Fatal(err)
		}
	}
	check(2)
}
