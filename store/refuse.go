package store

import (
	"fmt"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/marker"
)

// refuse records a refused compaction of p; lastTurn is the turn of the
// span's last event, as the raw log holds it, and spanBytes the size of an
// L1 span's events in a resumed context.
func (ss *sess) refuse(st *stateRec, p *Plan, lastTurn, spanBytes uint64, sum Summary, ie *marker.InvalidError, res *CommitResult) error {
	at := p.From - 1
	ck, err := ss.usableCheckpointAt(at)
	if err != nil {
		return err
	}
	if ck == 0 {
		prefix, err := ss.roots(at)
		if err != nil {
			return err
		}
		ids := make([]uint64, 0, len(prefix))
		for _, r := range prefix {
			if r.To <= at {
				ids = append(ids, r.Node)
			}
		}
		if ck, err = ss.putCheckpoint(st, at, ids, fmt.Sprintf("compaction of seq %d..%d refused", p.From, p.To)); err != nil {
			return err
		}
	}
	st.NextAudit++
	r := Refusal{ID: st.NextAudit, Depth: p.Depth, From: p.From, To: p.To, FrameVersion: p.FrameVersion,
		Summarizer: sum.Summarizer, Attempt: sum.Attempt, Checkpoint: ck, Failures: ie.Failures}
	if err := ss.put(backend.Audit, recAudit, u64(r.ID), &auditRec{V: recordVersion, Refusal: r}); err != nil {
		return err
	}
	switch p.Kind {
	case PlanSpan:
		st.RefusedTo = p.To
		st.RefusedTurn = lastTurn
		st.RefusedBytes = st.CompactedBytes + spanBytes
	case PlanFold, PlanDigest:
		if st.FoldRefusedTo < p.From {
			// Not a retry of the fold refused last: what a commit of this
			// one restores.
			st.FoldRefusedPrev = st.FoldRefusedTo
		}
		st.FoldRefusedTo = p.To
	}
	res.Checkpoint, res.Refusal = ck, &r
	return ss.putState(st)
}

// joinIDs returns ids as "3,4".
