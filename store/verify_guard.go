package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
	"runtime"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"
)

// bbolt's tx.Check runs in a goroutine of its own: a panic or fault there —
// bbolt asserts that every page it reads names itself, and indexes its mmap
// with page ids read from the file — takes the whole process down, beyond
// the reach of guard. preCheck looks, in the caller's goroutine and under
// guard, at everything tx.Check will touch: the two meta pages and the
// freelist page (read from the file: their headers and checksums), then
// every page of every bucket (a full cursor walk, which reads the same
// pages through the same assertions). tx.Check runs only when all of that
// passed.
//
// A meta page that fails its checksum is also a problem of its own: bbolt
// then silently opens the other meta page, of the transaction before — after
// a power loss mid-commit that is the intended recovery (that commit was
// never acknowledged), but on a file damaged later it means the last
// committed transaction is gone.

// bbolt's on-disk layout (go.etcd.io/bbolt/internal/common): a 16-byte page
// header (id u64, flags u16, count u16, overflow u32), and in a meta page
// the meta record after it.
const (
	boltPageHeader   = 16
	boltMetaFlag     = 0x04
	boltFreelistFlag = 0x10
	boltVersion      = 2
	boltMetaChecksum = 56 // offset of the checksum in the meta record
	boltNoFreelist   = ^uint64(0)
)

type boltMeta struct {
	page                 int
	ok                   bool
	why                  string
	pageSize             uint32
	root, freelist, pgid uint64 // the root bucket's page, the freelist page, the high water mark
	txid                 uint64
	headerID             uint64
	headerFlags          uint16
	headerOK             bool // the page header is one bbolt's tx.page accepts
}

func readBoltMeta(f *os.File, page int, pageSize int) boltMeta {
	m := boltMeta{page: page}
	b := make([]byte, boltPageHeader+boltMetaChecksum+8)
	if _, err := f.ReadAt(b, int64(page*pageSize)); err != nil {
		m.why = fmt.Sprintf("unreadable: %v", err)
		return m
	}
	m.headerID = binary.LittleEndian.Uint64(b[0:])
	m.headerFlags = binary.LittleEndian.Uint16(b[8:])
	m.headerOK = m.headerID == uint64(page) && m.headerFlags == boltMetaFlag
	meta := b[boltPageHeader:]
	magic := binary.LittleEndian.Uint32(meta[0:])
	version := binary.LittleEndian.Uint32(meta[4:])
	m.pageSize = binary.LittleEndian.Uint32(meta[8:])
	m.root = binary.LittleEndian.Uint64(meta[16:])
	m.freelist = binary.LittleEndian.Uint64(meta[32:])
	m.pgid = binary.LittleEndian.Uint64(meta[40:])
	m.txid = binary.LittleEndian.Uint64(meta[48:])
	h := fnv.New64a()
	h.Write(meta[:boltMetaChecksum])
	switch {
	case !m.headerOK:
		m.why = fmt.Sprintf("page header names page %d with flags %#x", m.headerID, m.headerFlags)
	case magic != boltMagic:
		m.why = "bad magic"
	case version != boltVersion:
		m.why = fmt.Sprintf("version %d", version)
	case h.Sum64() != binary.LittleEndian.Uint64(meta[boltMetaChecksum:]):
		m.why = "checksum mismatch"
	default:
		m.ok = true
	}
	return m
}

// preCheck returns the problems it found and whether tx.Check is safe to
// run.
//
// graph is false when the page graph itself is damaged: then no cursor may
// walk the database at all.
func (db *DB) preCheck(tx *bolt.Tx) (problems []Problem, safe, graph bool) {
	pageSize := db.bolt.Info().PageSize
	f, err := os.Open(db.path)
	if err != nil {
		return []Problem{{What: fmt.Sprintf("bbolt: cannot read the meta pages: %v", err)}}, false, true
	}
	defer f.Close()
	safe = true
	var metas [2]boltMeta
	for i := range metas {
		metas[i] = readBoltMeta(f, i, pageSize)
		m := metas[i]
		if !m.headerOK {
			safe = false
		}
		if !m.ok {
			problems = append(problems, Problem{What: fmt.Sprintf("bbolt: meta page %d is damaged (%s): bbolt reads the other one, of transaction %d — if this page held a later commit, that commit is lost",
				i, m.why, uint64(tx.ID()))})
		}
	}
	// The freelist page of the meta in use (the valid one of the higher
	// transaction, as bbolt picks).
	use := metas[0]
	if !use.ok || (metas[1].ok && metas[1].txid > use.txid) {
		use = metas[1]
	}
	if use.ok && use.freelist != boltNoFreelist {
		var hdr [boltPageHeader]byte
		if use.freelist >= use.pgid {
			problems = append(problems, Problem{What: fmt.Sprintf("bbolt: freelist page %d is past the high water mark %d", use.freelist, use.pgid)})
			safe = false
		} else if _, err := f.ReadAt(hdr[:], int64(use.freelist)*int64(pageSize)); err != nil {
			problems = append(problems, Problem{What: fmt.Sprintf("bbolt: freelist page %d unreadable: %v", use.freelist, err)})
			safe = false
		} else if id, flags := binary.LittleEndian.Uint64(hdr[0:]), binary.LittleEndian.Uint16(hdr[8:]); id != use.freelist || flags != boltFreelistFlag {
			problems = append(problems, Problem{What: fmt.Sprintf("bbolt: freelist page %d names page %d with flags %#x", use.freelist, id, flags)})
			safe = false
		} else if over := uint64(binary.LittleEndian.Uint32(hdr[12:])); use.freelist+over >= use.pgid {
			// tx.Check counts its pages up to the overflow, in a uint32:
			// 0xFFFFFFFF never ends.
			problems = append(problems, Problem{What: fmt.Sprintf("bbolt: freelist page %d overflows %d pages past the high water mark %d", use.freelist, over, use.pgid)})
			safe = false
		}
	}
	// The page graph first: a cycle or a shared page would make every
	// cursor walk below — ours, tx.Check's, the sessions' checks — loop
	// forever (graph.go).
	w := newPageWalk(tx)
	w.release = func() { releaseRange(w.data) }
	if err := guard(func() error { return w.walkRoot(tx, allPages) }); err != nil {
		problems = append(problems, Problem{What: fmt.Sprintf("bbolt: damaged page graph: %v", err)})
		return problems, false, false
	}
	if err := guard(func() error { return walkBuckets(tx) }); err != nil {
		problems = append(problems, Problem{What: fmt.Sprintf("bbolt: damaged page structure: %v", err)})
		safe = false
	}
	return problems, safe, true
}

// bbolt page and element layout (go.etcd.io/bbolt/internal/common).
const (
	boltBranchFlag     = 0x01
	boltLeafFlag       = 0x02
	boltBucketLeafFlag = 0x01 // a leaf element that holds a bucket
	boltElement        = 16   // branch and leaf elements are both 16 bytes
	boltBucketHeader   = 16   // root pgid u64, sequence u64
	maxPageDepth       = 64
)

func clipKey(k []byte) []byte { return k[:min(len(k), 32)] }

// walkBuckets reads every key of every bucket, nested ones too: every
// branch and leaf page is read once.
func walkBuckets(tx *bolt.Tx) error {
	var touch byte // what the reads give, kept alive so that they happen
	defer runtime.KeepAlive(&touch)
	var walk func(b *bolt.Bucket, depth int) error
	walk = func(b *bolt.Bucket, depth int) error {
		if depth > 8 {
			return errors.New("buckets nested deeper than strata makes them")
		}
		c := b.Cursor()
		var prev []byte
		for k, v := c.First(); k != nil; k, v = c.Next() {
			// Read every byte of every key, and the ends of every value, as
			// tx.Check will: an element whose offsets point past the map
			// faults here, under guard, and not in tx.Check's goroutine.
			if prev != nil && bytes.Compare(prev, k) >= 0 {
				return errors.Newf("keys out of order: %q then %q", clipKey(prev), clipKey(k))
			}
			prev = k
			if len(v) > 0 {
				touch ^= v[0] ^ v[len(v)-1]
			}
			if v != nil {
				continue
			}
			if child := b.Bucket(k); child != nil {
				if err := walk(child, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(b, 1) })
}
