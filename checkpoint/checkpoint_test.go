package checkpoint_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/strata-go/strata/checkpoint"
)

func ck(id, seq uint64, status checkpoint.Status) checkpoint.Checkpoint {
	return checkpoint.Checkpoint{ID: id, Seq: seq, Status: status}
}

// nearest applies the fallback rule as a store does: the greatest index key
// of a usable checkpoint below FallbackBelow(seq).
func nearest(cs []checkpoint.Checkpoint, seq uint64) (uint64, bool) {
	var keys [][]byte
	for _, c := range cs {
		if c.Usable() {
			keys = append(keys, checkpoint.IndexKey(c.Seq, c.ID))
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	below := checkpoint.FallbackBelow(seq)
	for i := len(keys) - 1; i >= 0; i-- {
		if below == nil || bytes.Compare(keys[i], below) < 0 {
			_, id, ok := checkpoint.ParseIndexKey(keys[i])
			return id, ok
		}
	}
	return 0, false
}

func TestFallbackRule(t *testing.T) {
	valid, invalid := checkpoint.StatusValid, checkpoint.StatusInvalid
	cs := []checkpoint.Checkpoint{
		ck(1, 0, valid),
		ck(2, 12, invalid), // folded away
		ck(3, 23, valid),
		ck(5, 23, valid), // a newer checkpoint at the same seq
		ck(4, 23, valid),
		ck(6, 33, invalid),
		ck(7, 39, valid),
		ck(8, 1<<40, valid), // byte order is numeric order past one byte
	}
	cases := []struct {
		seq    uint64
		wantID uint64
	}{
		{0, 1},
		{11, 1},
		{12, 1}, // the checkpoint at 12 is invalid: fall back to 0
		{22, 1},
		{23, 5}, // at the seq itself; the newest on a tie
		{33, 5}, // 33 is invalid
		{38, 5},
		{39, 7},
		{1<<40 - 1, 7},
		{^uint64(0), 8},
	}
	for _, tc := range cases {
		if got, ok := nearest(cs, tc.seq); !ok || got != tc.wantID {
			t.Errorf("fallback from seq %d = %d, %v; want %d", tc.seq, got, ok, tc.wantID)
		}
	}
	if _, ok := nearest([]checkpoint.Checkpoint{ck(1, 20, valid)}, 19); ok {
		t.Error("a fallback from 19 took the checkpoint at 20")
	}
	if _, _, ok := checkpoint.ParseIndexKey([]byte("short")); ok {
		t.Error("ParseIndexKey took a 5-byte key")
	}
}

func TestStaleAfter(t *testing.T) {
	c := ck(1, 10, checkpoint.StatusValid)
	if !c.StaleAfter(10) || !c.StaleAfter(3) || c.StaleAfter(11) {
		t.Error("a usable checkpoint at 10 is stale exactly when a root from seq <= 10 is replaced")
	}
	c.Invalidate("folded", 4)
	if c.Usable() || c.Reason != "folded" || c.InvalidatedAt != 4 || c.StaleAfter(3) {
		t.Errorf("after Invalidate: %+v", c)
	}
}

func TestCheckpoint_Usable(t *testing.T) {
	for s, want := range map[checkpoint.Status]bool{checkpoint.StatusValid: true, checkpoint.StatusInvalid: false, 0: false} {
		c := ck(1, 0, s)
		if c.Usable() != want {
			t.Errorf("status %v: Usable() = %v", s, !want)
		}
	}
}

func TestStatus_String(t *testing.T) {
	for s, want := range map[checkpoint.Status]string{checkpoint.StatusValid: "valid", checkpoint.StatusInvalid: "invalid", 0: "status(0)"} {
		if got := s.String(); got != want {
			t.Errorf("Status(%d).String() = %q, want %q", s, got, want)
		}
		if b, _ := s.MarshalJSON(); string(b) != `"`+want+`"` {
			t.Errorf("Status(%d).MarshalJSON() = %s", s, b)
		}
	}
}
