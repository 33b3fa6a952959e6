package store

import (
	"bytes"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/checkpoint"
)

// Eager invalidation: a commit that changes the frame — a fold, a digest or
// a re-compaction takes roots out of it — invalidates, in its own
// transaction, every marker and checkpoint the change made stale, with the
// reason. What is stale is the rule of packages marker and checkpoint
// (Marker.Invalidate, Checkpoint.StaleAfter).

// invalidateMarker invalidates marker id, whose node stopped being a root.
func (ss *sess) invalidateMarker(id uint64, why string, version uint64, res *CommitResult) error {
	m, err := ss.marker(id)
	if err != nil {
		return err
	}
	if !m.Invalidate(why, version) {
		return nil
	}
	res.InvalidatedMarkers = append(res.InvalidatedMarkers, id)
	return ss.putMarker(&m)
}

// invalidateCheckpoints invalidates every checkpoint that replacing the
// root at from makes stale (checkpoint.StaleAfter): the index lists the
// usable ones by seq.
func (ss *sess) invalidateCheckpoints(from uint64, why string, version uint64, res *CommitResult) error {
	var keys [][]byte
	err := ss.scan(backend.CheckpointIndex, checkpoint.IndexKey(from, 0), func(k, _ []byte) (bool, error) {
		keys = append(keys, bytes.Clone(k))
		return true, nil
	})
	if err != nil {
		return err
	}
	if err := prefetch(ss.tx, func() []backend.Read {
		reads := make([]backend.Read, 0, len(keys))
		for _, k := range keys {
			if len(k) == 16 {
				reads = append(reads, backend.Read{Session: ss.id, Table: backend.Checkpoints, Key: k[8:]})
			}
		}
		return reads
	}); err != nil {
		return err
	}
	for _, k := range keys {
		if len(k) != 16 {
			return corrupt(ss.id, "ckvalid", k, errors.New("bad key"))
		}
		ck, err := ss.checkpoint(u64val(k[8:]))
		if err != nil {
			return err
		}
		if !ck.StaleAfter(from) {
			return corrupt(ss.id, "ckvalid", k, errors.Newf("indexes checkpoint %d at seq %d, status %v", ck.ID, ck.Seq, ck.Status))
		}
		ck.Invalidate(why, version)
		if err := ss.writeCheckpoint(&ck); err != nil {
			return err
		}
		if err := ss.b.Delete(backend.CheckpointIndex, k); err != nil {
			return err
		}
		res.InvalidatedCheckpoints = append(res.InvalidatedCheckpoints, ck.ID)
	}
	return nil
}
