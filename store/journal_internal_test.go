package store

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// bruteLastEventSeq is lastEventSeq by a full scan: the largest key of
// session num below <num> 0xFF.
func bruteLastEventSeq(e *bolt.Bucket, num [4]byte) (uint64, bool) {
	var lk, lv []byte
	found := false
	_ = e.ForEach(func(k, v []byte) error {
		if bytes.Compare(k, append(num[:], stateSuffix3)) < 0 {
			lk, lv, found = bytes.Clone(k), v, true
			if v == nil {
				lv = nil
			}
		}
		return nil
	})
	if !found || !bytes.HasPrefix(lk, num[:]) {
		return 0, true
	}
	if len(lk) != 13 || lk[4] != eventPrefix || lv == nil {
		return 0, false
	}
	return binary.BigEndian.Uint64(lk[5:]), true
}

// TestLastEventSeq checks lastEventSeq against a full scan
// for every session number 0..N+1 (and the top number), on buckets of
// random shape — sessions with no events, many events (leaf boundaries),
// a missing id key, the largest number without an id key, a bucket where
// an event belongs — committed (pages) and modified in the open
// transaction (nodes).
func TestLastEventSeq(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		path := filepath.Join(t.TempDir(), "b.db")
		b, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 1 + rng.IntN(40)
		put := func(tx *bolt.Tx, lo, hi int) error {
			e, err := tx.CreateBucketIfNotExists([]byte("e"))
			if err != nil {
				return err
			}
			for i := lo; i < hi; i++ {
				var num [4]byte
				binary.BigEndian.PutUint32(num[:], uint32(i))
				evs := 0
				switch rng.IntN(4) {
				case 0:
				case 1:
					evs = 1 + rng.IntN(3)
				default:
					evs = 1 + rng.IntN(300)
				}
				for s := 1; s <= evs; s++ {
					k := append(append(num[:], eventPrefix), binary.BigEndian.AppendUint64(nil, uint64(s))...)
					if rng.IntN(500) == 0 {
						if _, err := e.CreateBucket(k); err != nil {
							return err
						}
						continue
					}
					if err := e.Put(k, bytes.Repeat([]byte{'v'}, 1+rng.IntN(60))); err != nil {
						return err
					}
				}
				if rng.IntN(8) != 0 || i < hi-1 && rng.IntN(2) == 0 {
					if err := e.Put(append(num[:], stateSuffix3, idSuffix3), []byte("id")); err != nil {
						return err
					}
				}
			}
			return nil
		}
		check := func(tx *bolt.Tx, when string) {
			e := tx.Bucket([]byte("e"))
			for i := 0; i <= n+1; i++ {
				var num [4]byte
				binary.BigEndian.PutUint32(num[:], uint32(i))
				gs, gok := lastEventSeq(e, num)
				ws, wok := bruteLastEventSeq(e, num)
				if gs != ws || gok != wok {
					t.Fatalf("seed %d %s: session %d: lastEventSeq = %d %v, scan says %d %v", seed, when, i, gs, gok, ws, wok)
				}
			}
			num := [4]byte{0xFF, 0xFF, 0xFF, 0xFF}
			if gs, gok := lastEventSeq(e, num); gs != 0 || !gok {
				t.Fatalf("seed %d %s: top number: %d %v", seed, when, gs, gok)
			}
		}
		half := n / 2
		if err := b.Update(func(tx *bolt.Tx) error { return put(tx, 0, half) }); err != nil {
			t.Fatal(err)
		}
		if err := b.View(func(tx *bolt.Tx) error { check(tx, "committed"); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := b.Update(func(tx *bolt.Tx) error {
			if err := put(tx, half, n); err != nil {
				return err
			}
			check(tx, "in the transaction")
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := b.View(func(tx *bolt.Tx) error { check(tx, "committed 2"); return nil }); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
}
