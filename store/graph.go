package store

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/internal/errmark"
)

// bbolt trusts its page graph: a cursor descends from a bucket's root page
// through branch elements to leaves, and a branch page that points at itself
// or at an ancestor (a flipped bit in a page id is enough) makes that
// descent recurse until the stack overflows — a fatal error that no recover
// catches — or makes an iteration go round forever. A fault or a panic
// inside bbolt is caught by guard; a cycle is not. So nothing of a bucket
// is read through bbolt before its page graph has been walked here, once
// per DB handle:
//
//   - at Open, the root bucket's pages, the meta bucket and the sessions
//     bucket (the pages that list the sessions, not the sessions' own);
//   - before the first read of a session, the pages of that session's
//     bucket and of every bucket inside it.
//
// The walk reads the pages straight from bbolt's map, under guard. It reads
// every branch page whole, and of a leaf page only the header — except in
// the buckets that hold buckets, whose leaves hold the bucket headers to
// follow. Every page reached is recorded: a page reached twice is a cycle
// or two parents, and refused before any cursor could go there. The pages
// this handle writes later are its own, made from pages it checked.
//
// Verify walks the whole file the same way with every leaf read
// (walkAll).

// graphChecks remembers which sessions' page graphs this handle checked.
type graphChecks struct {
	mu      sync.Mutex
	done    map[string]bool
	nums    map[[4]byte]bool // format 4: the session numbers whose pages of "e" were walked
	tail    atomic.Bool      // formats 3 to 5: the pages of "e" where new (5: newly hot) sessions go were walked
	touched atomic.Int64     // pages the checks read since the last releaseMapped
}

func (g *graphChecks) tailWalked() bool { return g.tail.Load() }

func (g *graphChecks) markTail() { g.tail.Store(true) }

func (g *graphChecks) checkedNum(num [4]byte) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.nums[num]
}

func (g *graphChecks) markNum(num [4]byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.nums == nil {
		g.nums = map[[4]byte]bool{}
	}
	g.nums[num] = true
}

func (g *graphChecks) checked(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.done[id]
}

func (g *graphChecks) mark(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done == nil {
		g.done = map[string]bool{}
	}
	g.done[id] = true
}

// pagePolicy says how to walk a bucket's pages: whether its leaves hold
// values only (then only their headers are read), and for a bucket that
// holds buckets, how to walk the one under each key (nil: not walked).
type pagePolicy struct {
	values bool
	child  func(key []byte) *pagePolicy
	// buckets, when set, are the only keys (sorted) under which bbolt may
	// open a bucket here — the reads open them by name, through a seek. A
	// branch element whose key range holds none of them leads only to
	// values: below it, leaves need not be read whole (format 2's events).
	buckets [][]byte
	// lo, hi, when set, bound the keys to walk to lo <= key < hi (format
	// 3's events bucket, for one session): of a branch page, only the
	// elements whose key range meets them — and the leftmost path of the
	// first element past them, where a cursor's Next at the session's last
	// key goes. A seek or a Next within the session's keys reads no other
	// page.
	lo, hi []byte
	// leftmost: of a branch page, only the first element; rightmost: only
	// the last.
	leftmost, rightmost bool
	// inlineOnly: a bucket walked only when it is inline, inside its
	// parent's leaf (the events bucket at Open: its pages are walked per
	// session).
	inlineOnly bool
}

// eventPages is the policy for the pages of the events bucket (formats 3
// and 4) that hold session num's keys: values only, between <num> and
// <num+1>. It also walks the rightmost path of the element before them: the
// leaf there is the one bbolt merges a leaf of the session's into when a
// deletion (format 3: an open call resolved) leaves it under half full.
func eventPages(num [4]byte) *pagePolicy {
	lo := num[:]
	var hi []byte
	if n := binary.BigEndian.Uint32(lo); n != ^uint32(0) {
		hi = binary.BigEndian.AppendUint32(nil, n+1)
	}
	return &pagePolicy{values: true, lo: lo, hi: hi}
}

// leftmostPages and rightmostPages walk the leftmost and the rightmost path
// of a bucket of values.
var (
	leftmostPages  = &pagePolicy{values: true, leftmost: true}
	rightmostPages = &pagePolicy{values: true, rightmost: true}
)

// meets reports whether the keys lo <= key < hi (nil: unbounded) of a
// branch element meet policy's bounds.
func (policy *pagePolicy) meets(lo, hi []byte) bool {
	return (hi == nil || bytes.Compare(hi, policy.lo) > 0) && (lo == nil || policy.hi == nil || bytes.Compare(lo, policy.hi) < 0)
}

var (
	// valuePages is a bucket of values: every l0, nodes, roots... bucket,
	// and meta.
	valuePages = &pagePolicy{values: true}
	// sessionPages is a session's bucket of format f: buckets of values,
	// the state, and in format 2 the events.
	sessionPages = map[int]*pagePolicy{
		1: {child: func([]byte) *pagePolicy { return valuePages }, buckets: sortedNames(subBuckets(1))},
		2: {child: func([]byte) *pagePolicy { return valuePages }, buckets: sortedNames(subBuckets(2))},
		3: {child: func([]byte) *pagePolicy { return valuePages }, buckets: sortedNames(subBuckets(3))},
		4: {child: func([]byte) *pagePolicy { return valuePages }, buckets: sortedNames(subBuckets(4))},
		5: {child: func([]byte) *pagePolicy { return valuePages }, buckets: sortedNames(subBuckets(5))},
	}
	// topPages is the root bucket: meta, and the pages listing the sessions
	// without the sessions themselves — in format 2 the root's own, in
	// format 1 the sessions bucket's.
	topPages = &pagePolicy{child: func(k []byte) *pagePolicy {
		switch string(k) {
		case string(bucketMeta), string(bucketHot4), string(bucketJournal4):
			// Format 4's hot bucket and journal: every session reads them.
			return valuePages
		case string(bucketEvents3):
			return inlineValuePages
		case string(bucketSessions):
			return &pagePolicy{child: func([]byte) *pagePolicy { return nil }}
		}
		return nil
	}}
	// inlineValuePages is a bucket of values walked only when inline.
	inlineValuePages = &pagePolicy{values: true, inlineOnly: true}
	// allPages reads every page, every leaf whole: Verify's walk.
	allPages = &pagePolicy{}
)

func init() { allPages.child = func([]byte) *pagePolicy { return allPages } }

func sortedNames(names [][]byte) [][]byte {
	out := slices.Clone(names)
	slices.SortFunc(out, bytes.Compare)
	return out
}

// routes reports whether a seek for one of policy's buckets can reach the
// child of branch element i, whose keys are at least lo (nil: the first
// element, which takes every smaller key too) and below hi (nil: the last).
func (policy *pagePolicy) routes(lo, hi []byte) bool {
	for _, name := range policy.buckets {
		if (lo == nil || bytes.Compare(name, lo) >= 0) && (hi == nil || bytes.Compare(name, hi) < 0) {
			return true
		}
	}
	return false
}

// pageWalk walks page graphs within one transaction's view of the map.
type pageWalk struct {
	data     []byte // pages 0..hwm-1 of the transaction
	pageSize uint64
	hwm      uint64
	seen     []uint64 // a bit per page id below hwm: reached
	visited  int      // pages reached
	// release, when set, is called every releaseAfterPages pages: the walk
	// touches every page of what it walks, and a large session must not
	// stay in the resident set (see Snapshot.ReleaseMapped).
	release func()
}

// newPageWalk returns a walk over tx's pages. Call it, and the walk, under
// guard: a file shorter than the pages it claims faults on access.
func newPageWalk(tx *bolt.Tx) *pageWalk {
	info := tx.DB().Info()
	// Info().Data is the address of bbolt's map, held in a uintptr; the
	// map is not Go memory, and stays put while tx is open.
	base := *(*unsafe.Pointer)(unsafe.Pointer(&info.Data))
	return &pageWalk{
		data:     unsafe.Slice((*byte)(base), tx.Size()),
		pageSize: uint64(info.PageSize),
		hwm:      uint64(tx.Size()) / uint64(info.PageSize),
		seen:     make([]uint64, (uint64(tx.Size())/uint64(info.PageSize)+63)/64),
	}
}

// walkRoot walks the pages of tx's root bucket with policy.
func (w *pageWalk) walkRoot(tx *bolt.Tx, policy *pagePolicy) error {
	return w.page(uint64(tx.Cursor().Bucket().Root()), 0, policy)
}

// page walks the page id and what it leads to.
func (w *pageWalk) page(id uint64, depth int, policy *pagePolicy) error {
	if depth > maxPageDepth {
		return errors.Newf("pages nested deeper than %d", maxPageDepth)
	}
	if id < 2 || id >= w.hwm {
		return errors.Newf("page id %d outside 2..%d", id, w.hwm-1)
	}
	if w.seen[id/64]&(1<<(id%64)) != 0 {
		return errors.Newf("page %d reached twice", id)
	}
	w.seen[id/64] |= 1 << (id % 64)
	w.visited++
	if w.release != nil && w.visited%releaseAfterPages == 0 {
		w.release()
	}
	off := id * w.pageSize
	hdr := w.data[off : off+boltPageHeader]
	if got := binary.LittleEndian.Uint64(hdr); got != id {
		return errors.Newf("page %d names page %d", id, got)
	}
	overflow := uint64(binary.LittleEndian.Uint32(hdr[12:]))
	if id+overflow >= w.hwm {
		return errors.Newf("page %d overflows %d pages past the high water mark %d", id, overflow, w.hwm)
	}
	if err := w.elements(w.data[off:off+(1+overflow)*w.pageSize], depth, policy); err != nil {
		return errors.Wrapf(err, "page %d", id)
	}
	return nil
}

// elements walks the elements of page p (a page of the map, or an inline
// bucket's page inside a value).
func (w *pageWalk) elements(p []byte, depth int, policy *pagePolicy) error {
	if len(p) < boltPageHeader {
		return errors.New("shorter than a page header")
	}
	flags, count := binary.LittleEndian.Uint16(p[8:]), int(binary.LittleEndian.Uint16(p[10:]))
	switch {
	case flags != boltBranchFlag && flags != boltLeafFlag:
		return errors.Newf("flags %#x where a branch or leaf page was expected", flags)
	case flags == boltLeafFlag && policy.values:
		return nil // values only: nothing to follow
	case boltPageHeader+count*boltElement > len(p):
		return errors.Newf("%d elements do not fit", count)
	}
	met := false // policy.lo: an element met the keys
	for i := 0; i < count; i++ {
		off := boltPageHeader + i*boltElement
		e := p[off : off+boltElement]
		if flags == boltBranchFlag {
			pos, ksize := int(binary.LittleEndian.Uint32(e)), int(binary.LittleEndian.Uint32(e[4:]))
			if end := off + pos + ksize; pos < 0 || ksize < 0 || end > len(p) || end < off {
				return errors.Newf("branch element %d past the page", i)
			}
			// bbolt's seeks binary-search these keys: out of order, a seek
			// can land in a child other than the key ranges below say.
			if i > 0 && bytes.Compare(branchKey(p, i-1), p[off+pos:off+pos+ksize]) >= 0 {
				return errors.Newf("branch keys %d and %d out of order", i-1, i)
			}
			next := policy
			switch {
			case policy.leftmost && i > 0:
				return nil
			case policy.rightmost && i+1 < count:
				continue
			case policy.lo != nil:
				lo, hi, err := elementRange(p, i, count)
				if err != nil {
					return err
				}
				if !policy.meets(lo, hi) {
					if lo == nil || bytes.Compare(lo, policy.lo) < 0 {
						continue // before the keys: no read goes there
					}
					// The first element past the keys: a Next from the
					// last key descends its leftmost path; nothing goes
					// further.
					if err := w.page(binary.LittleEndian.Uint64(e[8:]), depth+1, leftmostPages); err != nil {
						return err
					}
					return nil
				}
				if !met && i > 0 {
					// The element before the keys: its rightmost leaf is
					// the session's first leaf's left sibling.
					if err := w.page(binary.LittleEndian.Uint64(p[off-boltElement+8:]), depth+1, rightmostPages); err != nil {
						return err
					}
				}
				met = true
			}
			if policy.buckets != nil {
				lo, hi, err := elementRange(p, i, count)
				if err != nil {
					return err
				}
				if !policy.routes(lo, hi) {
					next = valuePages
				}
			}
			if err := w.page(binary.LittleEndian.Uint64(e[8:]), depth+1, next); err != nil {
				return err
			}
			continue
		}
		eflags := binary.LittleEndian.Uint32(e)
		pos, ksize, vsize := int(binary.LittleEndian.Uint32(e[4:])), int(binary.LittleEndian.Uint32(e[8:])), int(binary.LittleEndian.Uint32(e[12:]))
		end := off + pos + ksize + vsize
		if pos < 0 || ksize < 0 || vsize < 0 || end > len(p) || end < off {
			return errors.Newf("leaf element %d past the page", i)
		}
		if eflags&boltBucketLeafFlag == 0 {
			continue
		}
		v := p[off+pos+ksize : end]
		if len(v) < boltBucketHeader {
			return errors.Newf("bucket element %d holds %d bytes", i, len(v))
		}
		next := policy.child(p[off+pos : off+pos+ksize])
		if next == nil {
			continue
		}
		if root := binary.LittleEndian.Uint64(v); root != 0 {
			if next.inlineOnly {
				continue
			}
			if err := w.page(root, depth+1, next); err != nil {
				return err
			}
			continue
		}
		// An inline bucket: bbolt writes only leaves inline.
		inline := v[boltBucketHeader:]
		if len(inline) >= boltPageHeader && binary.LittleEndian.Uint16(inline[8:]) != boltLeafFlag {
			return errors.Newf("inline bucket in element %d is not a leaf page", i)
		}
		if err := w.elements(inline, depth+1, next); err != nil {
			return errors.Wrapf(err, "inline bucket in element %d", i)
		}
	}
	return nil
}

// elementRange returns the keys lo <= key < hi that reach the child of
// branch element i of page p (count elements): nil lo for the first
// element, which takes every smaller key too, nil hi for the last.
func elementRange(p []byte, i, count int) (lo, hi []byte, err error) {
	if i > 0 {
		lo = branchKey(p, i)
	}
	if i+1 < count {
		hi = branchKey(p, i+1)
	}
	if lo == nil && i > 0 || hi == nil && i+1 < count {
		return nil, nil, errors.Newf("branch element %d or %d past the page", i, i+1)
	}
	return lo, hi, nil
}

// branchKey returns the key of branch element i of page p, or nil if it is
// not inside the page.
func branchKey(p []byte, i int) []byte {
	off := boltPageHeader + i*boltElement
	if off+boltElement > len(p) {
		return nil
	}
	pos, ksize := int(binary.LittleEndian.Uint32(p[off:])), int(binary.LittleEndian.Uint32(p[off+4:]))
	if end := off + pos + ksize; pos < 0 || ksize < 0 || end > len(p) || end < off {
		return nil
	}
	return p[off+pos : off+pos+ksize]
}

// checkTop walks the root bucket's pages, the meta bucket's and the pages
// listing the sessions: what Open reads first.
func checkTop(tx *bolt.Tx) error {
	err := guard(func() error { return newPageWalk(tx).walkRoot(tx, topPages) })
	if err != nil {
		return errmark.Mark(errors.Wrap(err, "damaged page graph"), ErrCorrupt)
	}
	return nil
}

// releaseAfterPages is how many pages the checks may touch before they ask
// the kernel to drop them from the process's resident set. Each touch can
// map up to 16 pages (the kernel's fault-around), so 128 touches stay
// within 8 MiB.
const releaseAfterPages = 128

// walkEvents walks the pages of the events bucket e (formats 3 and 4) that a read or
// a write of session number num can reach (eventPages), under guard, in a
// walk of its own: the bucket's upper pages are reached by every session's
// walk. It returns how many pages it reached.
func walkEvents(tx *bolt.Tx, e *bolt.Bucket, num [4]byte) (int, error) {
	if e.Root() == 0 {
		return 0, nil // inline: inside the root's leaf, checked at Open (topPages)
	}
	w := newPageWalk(tx)
	w.release = func() { releaseRange(w.data) }
	err := guard(func() error { return w.page(uint64(e.Root()), 1, eventPages(num)) })
	return w.visited, err
}

// session returns session id's records inside tx — a sess whose bucket is
// nil when the session does not exist — once its page graph has been
// checked by this handle. In formats 3 and 4 that includes the pages of the events
// bucket that hold the session's keys (eventPages).
func (db *DB) session(tx *bolt.Tx, id string) (*sess, error) {
	b := lookupSession(tx, db.format, id)
	if b == nil || db.graph.checked(id) {
		return newSess(tx, db.format, id, b)
	}
	root := uint64(b.Root())
	if root == 0 {
		// A bucket holding buckets is never inline.
		return nil, corrupt(id, "", nil, errors.New("session bucket stored inline"))
	}
	w := newPageWalk(tx)
	w.release = func() { releaseRange(w.data) }
	err := guard(func() error { return w.page(root, 1, sessionPages[db.format]) })
	var s *sess
	if err == nil {
		// Read through bbolt only now that the session's pages are sound.
		if s, err = newSess(tx, db.format, id, b); err != nil {
			return nil, err
		}
		if s.e != nil {
			var n int
			n, err = walkEvents(tx, s.e, s.num)
			w.visited += n
			if err == nil {
				db.graph.markNum(s.num)
			}
		}
	}
	if db.graph.touched.Add(int64(w.visited)) > releaseAfterPages {
		// Many small sessions, each checked below the walk's own threshold:
		// their pages too leave the resident set.
		db.graph.touched.Store(0)
		releaseRange(w.data)
	}
	if err != nil {
		return nil, corrupt(id, "", nil, errors.Wrap(err, "damaged page graph"))
	}
	db.graph.mark(id)
	return s, nil
}
