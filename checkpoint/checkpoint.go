package checkpoint

import "github.com/strata-go/strata/tier"

// Status is a checkpoint's state: valid until a frame change makes it stale.
type Status = tier.Status

// Statuses, as tier defines them.
const (
	StatusValid   = tier.StatusValid
	StatusInvalid = tier.StatusInvalid
)

// Checkpoint is a raw checkpoint: the roots ending at or before Seq when it
// was written (Prefix, in order), and the raw log after Seq.
type Checkpoint struct {
	ID           uint64   `json:"id"`
	Seq          uint64   `json:"seq"`
	Prefix       []uint64 `json:"prefix,omitempty"`
	FrameVersion uint64   `json:"frame_version"`
	Why          string   `json:"why"` // why it was written
	Status       Status   `json:"status"`
	// Reason says why it was invalidated, and InvalidatedAt at which frame
	// version; empty while it is usable.
	Reason        string `json:"reason,omitempty"`
	InvalidatedAt uint64 `json:"invalidated_at,omitempty"`
}

// Usable reports whether c may serve a resume.
func (c *Checkpoint) Usable() bool { return c.Status == StatusValid }

// Nearest returns the usable checkpoint with the greatest Seq at or before
// seq (the newest one on a tie), and false if there is none.
func Nearest(cs []Checkpoint, seq uint64) (Checkpoint, bool) {
	var best Checkpoint
	found := false
	for _, c := range cs {
		if !c.Usable() || c.Seq > seq {
			continue
		}
		if !found || c.Seq > best.Seq || (c.Seq == best.Seq && c.ID > best.ID) {
			best, found = c, true
		}
	}
	return best, found
}
