package checkpoint_test

import (
	"testing"

	"github.com/strata-go/strata/checkpoint"
)

func ck(id, seq uint64, status checkpoint.Status) checkpoint.Checkpoint {
	return checkpoint.Checkpoint{ID: id, Seq: seq, Status: status}
}

func TestNearest(t *testing.T) {
	valid, invalid := checkpoint.StatusValid, checkpoint.StatusInvalid
	cs := []checkpoint.Checkpoint{
		ck(1, 0, valid),
		ck(2, 12, invalid), // folded away
		ck(3, 23, valid),
		ck(5, 23, valid), // a newer checkpoint at the same seq
		ck(4, 23, valid),
		ck(6, 33, invalid),
		ck(7, 39, valid),
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
		{^uint64(0), 7},
	}
	for _, tc := range cases {
		got, ok := checkpoint.Nearest(cs, tc.seq)
		if !ok || got.ID != tc.wantID {
			t.Errorf("Nearest(seq %d) = %d, %v; want %d", tc.seq, got.ID, ok, tc.wantID)
		}
		if ok && (!got.Usable() || got.Seq > tc.seq) {
			t.Errorf("Nearest(seq %d) returned unusable or later checkpoint %+v", tc.seq, got)
		}
	}
}

func TestNearest_None(t *testing.T) {
	if _, ok := checkpoint.Nearest(nil, 10); ok {
		t.Error("Nearest of no checkpoints found one")
	}
	onlyInvalid := []checkpoint.Checkpoint{ck(1, 0, checkpoint.StatusInvalid), ck(2, 5, checkpoint.StatusInvalid)}
	if c, ok := checkpoint.Nearest(onlyInvalid, 10); ok {
		t.Errorf("Nearest of invalid checkpoints found %+v", c)
	}
	later := []checkpoint.Checkpoint{ck(1, 20, checkpoint.StatusValid)}
	if c, ok := checkpoint.Nearest(later, 19); ok {
		t.Errorf("Nearest(19) found the checkpoint at 20: %+v", c)
	}
	unknown := []checkpoint.Checkpoint{ck(1, 0, 0), ck(2, 0, 7)}
	if c, ok := checkpoint.Nearest(unknown, 10); ok {
		t.Errorf("Nearest found a checkpoint of unknown status: %+v", c)
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
