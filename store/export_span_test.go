package store

import (
	"slices"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/tier"
)

// SpoilOpenFacts drops the call with id from the open set recorded with
// node id of session, as damage that still decodes would.
func SpoilOpenFacts(db *DB, session string, id uint64, call string) error {
	return editNode(db, session, id, func(r *nodeRec) error {
		f := r.facts()
		if f == nil {
			return errors.Newf("node %d has no facts", id)
		}
		spoilt := *f
		spoilt.Unresolved = slices.DeleteFunc(slices.Clone(f.Unresolved), func(o tier.Open) bool { return o.ID == call })
		if len(spoilt.Unresolved) == len(f.Unresolved) {
			return errors.Newf("node %d records %q closed", id, call)
		}
		r.Facts, r.FactsInClaims = &spoilt, false
		return nil
	})
}

// FactsInClaims reports whether node id of session records its facts as
// its claims (stored once).
func FactsInClaims(db *DB, session string, id uint64) (bool, error) {
	var in bool
	err := db.view(func(tx backend.Tx) error {
		ss, err := openSess(tx, session)
		if err != nil {
			return err
		}
		r, err := ss.nodeRecord(id)
		in = r.FactsInClaims
		return err
	})
	return in, err
}
