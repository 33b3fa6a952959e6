package checkpoint

import (
	"encoding/binary"

	"github.com/strata-go/strata/tier"
)

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

// The fallback rule: a resume that cannot trust a marker at boundary b
// falls back to the usable checkpoint with the greatest Seq at or before b,
// the newest (greatest ID) on a tie. A store keeps its usable checkpoints in
// an index ordered by IndexKey, and the checkpoint the rule picks is the one
// whose key is the greatest below FallbackBelow(b): one seek, however many
// checkpoints a session has.

// IndexKey is checkpoint id's key, at seq, in the index of usable
// checkpoints: seq then id, big-endian, so that byte order is the fallback
// rule's order.
func IndexKey(seq, id uint64) []byte {
	k := make([]byte, 16)
	binary.BigEndian.PutUint64(k, seq)
	binary.BigEndian.PutUint64(k[8:], id)
	return k
}

// ParseIndexKey returns the seq and id of an index key, and false for a key
// that is not one.
func ParseIndexKey(k []byte) (seq, id uint64, ok bool) {
	if len(k) != 16 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(k[8:]), true
}

// FallbackBelow returns the index key that the checkpoint a fallback from
// boundary takes sorts just below; nil for the greatest boundary (every
// key).
func FallbackBelow(boundary uint64) []byte {
	if boundary == ^uint64(0) {
		return nil
	}
	return IndexKey(boundary+1, 0)
}

// StaleAfter reports whether replacing the root that starts at seq from
// makes c stale: a usable checkpoint at or after from holds that root in
// its prefix (its prefix is every root up to its seq), so it must be
// invalidated in the same transaction as the frame change.
func (c *Checkpoint) StaleAfter(from uint64) bool { return c.Usable() && c.Seq >= from }

// Invalidate marks c unusable at frame version version, for the reason why.
func (c *Checkpoint) Invalidate(why string, version uint64) {
	c.Status, c.Reason, c.InvalidatedAt = StatusInvalid, why, version
}
