// Package checkpoint holds raw checkpoints and the canonical rendering of a
// resumed context.
//
// A checkpoint at seq P records the roots that ended at or before P when it
// was written. Its context is those roots plus the raw log after P. The
// checkpoint at P = 0 has no roots: pure raw, always usable. A checkpoint is
// invalidated, with its reason, by the compaction whose frame change makes
// one of its roots stop being a root.
//
// Resume is wholesale: a valid marker is trusted entirely, otherwise the
// nearest usable checkpoint serves entirely; nothing is patched. The
// rendering is canonical — no map iteration, no clock, no process state — so
// the same database gives the same bytes after a reopen and from a backup,
// and Context.SHA256 proves it.
package checkpoint
