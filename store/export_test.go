package store

import (
	"fmt"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/tier"
)

// Hooks for the external tests (package store_test). They live in package
// store_test because they open databases through internal/dbtest, which
// imports store: an internal test importing it would be an import cycle.

// PutRecord stores payload as the record at key of session's place —
// "l0" (key: the seq, 8 bytes big-endian), "state" (key ignored) or a
// table by its name — through the backend, which seals it as its own: a
// record that passes the backend's check, whatever the store makes of it.
// A nil payload deletes a table's record.
func PutRecord(db *DB, session, place string, key, payload []byte) error {
	return db.update(func(tx backend.Tx) error {
		ss, err := openSess(tx, session)
		if err != nil {
			return err
		}
		switch place {
		case "l0":
			seq, err := parseU64(key)
			if err != nil {
				return err
			}
			if payload == nil {
				return errors.New("store: the backend deletes no event")
			}
			return ss.b.PutEvent(seq, payload)
		case "state":
			return ss.b.PutState(payload)
		}
		for t := backend.Table(1); t < backend.Tables; t++ {
			if t.String() != place {
				continue
			}
			if payload == nil {
				return ss.b.Delete(t, key)
			}
			return ss.b.Put(t, key, payload)
		}
		return errors.Newf("store: no place %q", place)
	})
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

// SetCopyBatch makes Copy write at most n values per destination
// transaction until the returned function restores the default. For tests
// that are not parallel.
func SetCopyBatch(n int) (restore func()) {
	old := copyBatchValues
	copyBatchValues = n
	return func() { copyBatchValues = old }
}

// RawSessions returns every value of every session of db as its backend
// returns it, by session and place: "state", "l0 <seq>", "<table> <key>"
// (the key quoted). Two databases whose RawSessions are equal hold the
// same bytes.
func RawSessions(db *DB) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	err := db.view(func(tx backend.Tx) error {
		return tx.Sessions(func(id string) error {
			b, err := tx.Session(id)
			if err != nil {
				return err
			}
			m := map[string]string{}
			st, err := b.State()
			if err != nil {
				return err
			}
			if st != nil {
				m["state"] = string(st)
			}
			err = b.Events(1, ^uint64(0), func(seq uint64, v []byte) (bool, error) {
				m[fmt.Sprintf("l0 %d", seq)] = string(v)
				return true, nil
			})
			if err != nil {
				return err
			}
			for t := backend.Table(1); t < backend.Tables; t++ {
				err := b.Scan(t, nil, func(k, v []byte) (bool, error) {
					m[fmt.Sprintf("%s %q", t, k)] = string(v)
					return true, nil
				})
				if err != nil {
					return err
				}
			}
			out[id] = m
			return nil
		})
	})
	return out, err
}

// StateAtReplay is Snapshot.StateAt from every raw event 1..seq, which
// StateAt's composition from the first root's facts must equal.
func (s *Snapshot) StateAtReplay(session string, seq uint64) (checkpoint.State, error) {
	return s.stateAtReplay(session, seq)
}
