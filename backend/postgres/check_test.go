package postgres

import (
	"fmt"
	"strings"
	"testing"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/internal/pgtest"
)

// Check reads every row of a table longer than its page, across the pages
// and across the sessions a page ends in, once: the rows damaged by SQL in
// the first page and in the pages after it are each reported once, and no
// other.
func TestCheck_Pages(t *testing.T) {
	b, url := openBackend(t)
	// Session a's rows end inside the first page of each table, b's go on
	// past it.
	sizes := map[string]int{"a": checkPage - 24, "b": checkPage + 100}
	err := b.Update(func(tx backend.Tx) error {
		for _, id := range []string{"a", "b"} {
			s, err := tx.CreateSession(id)
			if err != nil {
				return err
			}
			for i := 1; i <= sizes[id]; i++ {
				if err := s.PutEvent(uint64(i), fmt.Appendf(nil, "event %d", i)); err != nil {
					return err
				}
				if err := s.Put(backend.Nodes, fmt.Appendf(nil, "n%05d", i), fmt.Appendf(nil, "node %d", i)); err != nil {
					return err
				}
			}
			if err := s.PutState([]byte("state")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check := func() []string {
		var got []string
		err := b.View(func(tx backend.Tx) error {
			safe, err := b.Check(tx, func(session, what string) { got = append(got, session+": "+what) })
			if err == nil && !safe {
				err = fmt.Errorf("Check not safe")
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := check(); len(got) != 0 {
		t.Fatalf("Check of an undamaged database: %q", got)
	}
	// a's last row, b's first, the last of the first page (a's rows and 24
	// of b's fill it), the first of the second and b's last.
	pgtest.Exec(t, url,
		fmt.Sprintf(`UPDATE strata_events SET value = 'x' WHERE (session, seq) IN (('a', %d), ('b', 1), ('b', 24), ('b', 25), ('b', %d))`, sizes["a"], sizes["b"]),
		fmt.Sprintf(`UPDATE strata_nodes SET value = 'x' WHERE (session, key) IN (('a', 'n%05d'), ('b', 'n00001'), ('b', 'n00024'), ('b', 'n00025'), ('b', 'n%05d'))`, sizes["a"], sizes["b"]))
	got := check()
	want := []string{
		fmt.Sprintf(`a: l0 key %d`, sizes["a"]), `b: l0 key 1`, `b: l0 key 24`, `b: l0 key 25`, fmt.Sprintf(`b: l0 key %d`, sizes["b"]),
		fmt.Sprintf(`a: nodes key "n%05d"`, sizes["a"]), `b: nodes key "n00001"`, `b: nodes key "n00024"`, `b: nodes key "n00025"`, fmt.Sprintf(`b: nodes key "n%05d"`, sizes["b"]),
	}
	if len(got) != len(want) {
		t.Fatalf("Check reported %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		session, place, _ := strings.Cut(w, ": ")
		if !strings.HasPrefix(got[i], session+": ") || !strings.Contains(got[i], place) || !strings.Contains(got[i], "checksum mismatch") {
			t.Errorf("problem %d: %q, want the damage of session %s at %s", i, got[i], session, place)
		}
	}
}
