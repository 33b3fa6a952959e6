package store

// CommitUnchecked commits a summary of plan p the way every compaction
// scheme in the field does today: trusted, without validation.
//
// THIS IS UNSAFE: it exists only to measure what validation prevents
// (`strata eval`, package eval). It commits the node, its marker and the
// checkpoint at its boundary exactly as Commit does for a valid summary —
// through the same code — but never calls marker.Validate and never checks
// the summary's size, so the marker may promise facts its node does not
// carry. The consistency checks that are not validation stay: the frame must
// be the one planned against and the raw span must hash as planned (else
// ErrConflict or ErrSpanChanged), so the database's structure stays sound.
//
// A database written through CommitUnchecked fails Verify, which
// re-validates every root's claims against its raw span: that is expected.
// Never use it on a database an agent resumes from.
func (db *DB) CommitUnchecked(p *Plan, sum Summary) (CommitResult, error) {
	return db.commit(p, sum, false, nil)
}
