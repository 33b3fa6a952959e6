package store

import (
	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/tier"
)

// Hooks for the external tests (package store_test). They live in package
// store_test because they open databases through internal/dbtest, which
// imports store: an internal test importing it would be an import cycle.

// EncodeMetaFormat returns the meta/format record of a database of the given
// format version, encoded as the store encodes it.
func EncodeMetaFormat(format int) ([]byte, error) {
	return encode(recMeta, &metaRec{V: recordVersion, Format: format, CreatedBy: "strata-test"})
}

// EnvelopeHeader is the size of a stored value's envelope header.
const EnvelopeHeader = envelopeHeader

// JournalState reports, through the open handle, format 4's journal
// sequence, how many entries it holds and how many session pointers
// (<n> 0x01) the hot bucket holds.
func JournalState(db *DB) (seq uint64, entries, pointers int, err error) {
	err = db.view(func(tx *bolt.Tx) error {
		j, h := tx.Bucket(bucketJournal4), tx.Bucket(bucketHot4)
		seq = j.Sequence()
		entries = j.Stats().KeyN
		c := h.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if len(k) == 5 && k[4] == journalSuffix4 {
				pointers++
			}
		}
		return nil
	})
	return
}

// EncodeLedgerRecord encodes v — a *tier.Disposition, *tier.Constraint or
// *tier.Artifact — as the ledger stores it.
func EncodeLedgerRecord(v any) ([]byte, error) {
	switch v.(type) {
	case *tier.Disposition:
		return encode(recDisp, v)
	case *tier.Constraint:
		return encode(recConstraint, v)
	}
	return encode(recArtifact, v)
}

// DecodeLedgerRecord decodes a stored ledger record into v, as
// EncodeLedgerRecord.
func DecodeLedgerRecord(raw []byte, v any) error {
	switch v.(type) {
	case *tier.Disposition:
		return decode(recDisp, raw, v)
	case *tier.Constraint:
		return decode(recConstraint, raw, v)
	}
	return decode(recArtifact, raw, v)
}
