package store_test

import "testing"

// TestInvalidate_Frame runs testdata/protocol/invalidate: a fold, a digest
// and a re-compaction invalidate, in their own commit, the markers and
// checkpoints below them with the reason and the frame version; resume
// from an invalidated marker falls back to a checkpoint and says why; a
// refused digest invalidates nothing.
func TestInvalidate_Frame(t *testing.T) { runProtocol(t, "invalidate") }
