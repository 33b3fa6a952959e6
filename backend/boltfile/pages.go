package boltfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"unsafe"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"
)

// bbolt trusts its page graph: a cursor descends from a bucket's root page
// through branch elements to leaves, and a branch page that points at
// itself or at an ancestor (a flipped bit in a page id is enough) makes
// that descent recurse until the stack overflows — a fatal error no
// recover catches — or makes an iteration go round forever. A fault or a
// panic inside bbolt is caught by the guard (guard.go); a cycle is not.
//
// So before bbolt reads pages for an operation, the pages that operation
// can reach are walked here, straight from bbolt's map: a shadow of bbolt's
// cursor (shadow) takes the same steps bbolt's will — the same binary
// search down the branch pages, the same moves to the next or previous
// leaf — and checks every page on the way:
//
//   - its id is inside the file (2 ≤ id < the high water mark) and its
//     header names it, its overflow stays inside the file, its flags are a
//     branch's or a leaf's;
//   - a branch page has elements, inside the page, with keys in order and
//     child ids inside the file; a leaf's elements are inside the page,
//     with keys in order;
//   - the page's keys lie inside the range its parent's branch keys give
//     it, and no page is reached twice in one walk;
//   - the page's bytes past its last element are zero, as bbolt writes
//     them: a bit less in the element count leaves records out of every
//     read, with no checksum to break, but their bytes stay on the page.
//
// A Get or a Put walks the path to its key's leaf; a Delete also the
// siblings at every level (bbolt's rebalance merges a node into one of
// them at commit); a Scan or an Events read walks a leaf ahead of bbolt's
// cursor as it goes (ahead), so that a read that stops early has walked
// only what it read; Last walks the path to its bound and the leaves on
// either side. The leaves these walks reach are checked whole: bbolt reads
// them anyway, and a damaged element's offset would otherwise give a
// cursor a key of garbage, which could end a range read early without an
// error. What a page's own checks proved is kept per handle for the
// transaction id it was proved at (pageCache): a commit starts afresh,
// since the pages it freed are written anew by the next.

// bbolt's on-disk layout (go.etcd.io/bbolt/internal/common).
const (
	pageHeader     = 16 // id u64, flags u16, count u16, overflow u32
	elementSize    = 16 // branch: pos u32, ksize u32, pgid u64; leaf: flags u32, pos u32, ksize u32, vsize u32
	bucketHeader   = 16 // root pgid u64, sequence u64
	branchFlag     = 0x01
	leafFlag       = 0x02
	metaFlag       = 0x04
	freelistFlag   = 0x10
	bucketLeafFlag = 0x01 // a leaf element that holds a bucket
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	// maxDepth bounds the pages on one path: a tree of bbolt's is that
	// deep only past 2^32 pages.
	maxDepth = 32
)

func le16(b []byte) int    { return int(binary.LittleEndian.Uint16(b)) }
func le32(b []byte) int    { return int(binary.LittleEndian.Uint32(b)) }
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// clip shortens a key for an error message.
func clip(k []byte) string {
	if len(k) > 32 {
		return fmt.Sprintf("%q…", k[:32])
	}
	return fmt.Sprintf("%q", k)
}

// walker reads a transaction's pages from bbolt's map.
type walker struct {
	data  []byte // pages 0..hwm-1
	ps    uint64 // page size
	hwm   uint64 // high water mark: the first page id past the file's pages
	known *pageCache
}

// newWalker returns a walker over btx's pages. Use it, and what it
// returns, under guard: a file shorter than the pages it claims faults on
// access.
func newWalker(btx *bolt.Tx, known *pageCache) walker {
	info := btx.DB().Info()
	// Info().Data is the address of bbolt's map, held in a uintptr; the map
	// is not Go memory, and stays put while btx is open (bbolt remaps only
	// in a commit, and only once every read transaction has ended).
	base := *(*unsafe.Pointer)(unsafe.Pointer(&info.Data))
	size := uint64(btx.Size())
	return walker{
		data:  unsafe.Slice((*byte)(base), size),
		ps:    uint64(info.PageSize),
		hwm:   size / uint64(info.PageSize),
		known: known,
	}
}

// page is one page of the map (with its overflow), or an inline bucket's
// page inside its parent's value (id 0).
type page struct {
	id   uint64
	b    []byte
	leaf bool
	n    int // elements
}

// load returns page id, checked.
func (w *walker) load(id uint64) (page, error) {
	if id < 2 || id >= w.hwm {
		return page{}, errors.Newf("page id %d outside 2..%d", id, w.hwm-1)
	}
	off := id * w.ps
	h := w.data[off : off+pageHeader]
	if got := le64(h); got != id {
		return page{}, errors.Newf("page %d names page %d", id, got)
	}
	flags, n, overflow := le16(h[8:]), le16(h[10:]), uint64(le32(h[12:]))
	if overflow >= w.hwm-id {
		return page{}, errors.Newf("page %d overflows %d pages past the high water mark %d", id, overflow, w.hwm)
	}
	p := page{id: id, b: w.data[off : off+(1+overflow)*w.ps], n: n}
	switch flags {
	case branchFlag:
	case leafFlag:
		p.leaf = true
	default:
		return page{}, errors.Newf("page %d has flags %#x where a branch or leaf page was expected", id, flags)
	}
	if w.known.has(id) {
		return p, nil
	}
	if err := p.check(w.hwm, w.ps); err != nil {
		return page{}, errors.Wrapf(err, "page %d", id)
	}
	w.known.add(id)
	return p, nil
}

// inlinePage returns the page of an inline bucket, the bytes after its
// header in the parent's value, checked whole.
func inlinePage(v []byte) (page, error) {
	if len(v) < pageHeader {
		return page{}, errors.Newf("inline bucket of %d bytes", len(v))
	}
	// bbolt writes only leaves inline.
	if flags := le16(v[8:]); flags != leafFlag {
		return page{}, errors.Newf("inline bucket with flags %#x, not a leaf", flags)
	}
	p := page{b: v, leaf: true, n: le16(v[10:])}
	if err := p.check(0, 0); err != nil {
		return page{}, errors.Wrap(err, "inline bucket")
	}
	return p, nil
}

// check checks p's elements. hwm bounds a branch's child ids.
func (p *page) check(hwm, ps uint64) error {
	if pageHeader+p.n*elementSize > len(p.b) {
		return errors.Newf("%d elements do not fit", p.n)
	}
	if !p.leaf && p.n == 0 {
		return errors.New("a branch page without elements")
	}
	extent := pageHeader + p.n*elementSize
	var prev []byte
	for i := 0; i < p.n; i++ {
		off := pageHeader + i*elementSize
		e := p.b[off : off+elementSize]
		var pos, ksize, vsize int
		if p.leaf {
			flags := binary.LittleEndian.Uint32(e)
			pos, ksize, vsize = le32(e[4:]), le32(e[8:]), le32(e[12:])
			if flags&^bucketLeafFlag != 0 {
				return errors.Newf("leaf element %d has flags %#x", i, flags)
			}
			if flags&bucketLeafFlag != 0 && vsize < bucketHeader {
				return errors.Newf("bucket element %d holds %d bytes", i, vsize)
			}
		} else {
			pos, ksize = le32(e), le32(e[4:])
			if child := le64(e[8:]); child < 2 || child >= hwm {
				return errors.Newf("branch element %d points at page %d, outside 2..%d", i, child, hwm-1)
			}
		}
		end := off + pos + ksize + vsize
		if end > len(p.b) {
			return errors.Newf("element %d ends %d bytes past the page", i, end-len(p.b))
		}
		if ksize == 0 {
			return errors.Newf("element %d has an empty key", i)
		}
		extent = max(extent, end)
		k := p.b[off+pos : off+pos+ksize]
		if prev != nil && bytes.Compare(prev, k) >= 0 {
			return errors.Newf("keys %d and %d out of order", i-1, i)
		}
		prev = k
	}
	// bbolt writes a page from a zeroed buffer, its element headers
	// followed by their keys and values, packed: a byte past the last
	// element's value that is not zero is an element the count leaves out
	// — a flipped bit in the count makes bbolt skip records, with no
	// checksum to break.
	if i := nonZero(p.b[extent:]); i >= 0 {
		return errors.Newf("%d elements end at byte %d, but byte %d is written: the element count is damaged", p.n, extent, extent+i)
	}
	// bbolt gives a page as many overflow pages as its elements need, no
	// more (it rounds up; old versions added one when they filled pages
	// exactly): a page claiming more would free pages not its own.
	if p.id != 0 {
		if overflow := uint64(len(p.b))/ps - 1; overflow > 0 && overflow*ps > uint64(extent) {
			return errors.Newf("%d overflow pages for %d bytes", overflow, extent)
		}
	}
	return nil
}

// nonZero returns the index of the first byte of b that is not zero, or -1.
func nonZero(b []byte) int {
	for i, c := range b {
		if c != 0 {
			return i
		}
	}
	return -1
}

// key returns the key of element i (checked by check).
func (p *page) key(i int) []byte {
	off := pageHeader + i*elementSize
	e := p.b[off:]
	if p.leaf {
		pos, ksize := le32(e[4:]), le32(e[8:])
		return p.b[off+pos : off+pos+ksize]
	}
	pos, ksize := le32(e), le32(e[4:])
	return p.b[off+pos : off+pos+ksize]
}

// child returns the page id of branch element i.
func (p *page) child(i int) uint64 { return le64(p.b[pageHeader+i*elementSize+8:]) }

// leafFlags and value return leaf element i's flags and value.
func (p *page) leafFlags(i int) uint32 {
	return binary.LittleEndian.Uint32(p.b[pageHeader+i*elementSize:])
}

func (p *page) value(i int) []byte {
	off := pageHeader + i*elementSize
	e := p.b[off:]
	pos, ksize, vsize := le32(e[4:]), le32(e[8:]), le32(e[12:])
	return p.b[off+pos+ksize : off+pos+ksize+vsize]
}

// searchBranch returns the element of branch page p whose child a seek
// for key descends to, exactly as bbolt's Cursor.searchPage chooses it.
func searchBranch(p *page, key []byte) int {
	exact := false
	i := sort.Search(p.n, func(i int) bool {
		r := bytes.Compare(p.key(i), key)
		if r == 0 {
			exact = true
		}
		return r != -1
	})
	if !exact && i > 0 {
		i--
	}
	return i
}

// searchLeaf returns the first element of a fully checked leaf whose key
// is at least key, as bbolt's Cursor.nsearch.
func searchLeaf(p *page, key []byte) int {
	return sort.Search(p.n, func(i int) bool { return bytes.Compare(p.key(i), key) != -1 })
}

// pageCache remembers which pages passed their own checks (load), for one
// transaction id: every transaction of that id reads the same bytes at
// those pages. A handle's cache moves to the next id at its next
// transaction after a commit, empty. (A page's header is checked on every
// load: what the cache spares is the check of its elements.)
type pageCache struct {
	txid uint64
	mu   sync.RWMutex
	ok   map[uint64]struct{}
}

// maxCached bounds a cache: a read-only handle never moves to another
// transaction id, and a long life of reads would keep every page's entry.
const maxCached = 1 << 18

func newPageCache(txid uint64) *pageCache {
	return &pageCache{txid: txid, ok: make(map[uint64]struct{})}
}

func (c *pageCache) has(id uint64) bool {
	if c == nil {
		return false
	}
	c.mu.RLock()
	_, ok := c.ok[id]
	c.mu.RUnlock()
	return ok
}

func (c *pageCache) add(id uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if len(c.ok) < maxCached {
		c.ok[id] = struct{}{}
	}
	c.mu.Unlock()
}

// seenSet holds the pages one walk reached: a few in an array, more in a
// map, or a bit per page (bits, set by the whole-file walk).
type seenSet struct {
	small [24]uint64
	n     int
	m     map[uint64]struct{}
	bits  []uint64
}

// add records id and reports whether it was new.
func (s *seenSet) add(id uint64) bool {
	switch {
	case s.bits != nil:
		w, b := id/64, uint64(1)<<(id%64)
		if w >= uint64(len(s.bits)) {
			return true // past the file: load says so
		}
		if s.bits[w]&b != 0 {
			return false
		}
		s.bits[w] |= b
		return true
	case s.m != nil:
		if _, ok := s.m[id]; ok {
			return false
		}
		s.m[id] = struct{}{}
		return true
	}
	for _, x := range s.small[:s.n] {
		if x == id {
			return false
		}
	}
	if s.n < len(s.small) {
		s.small[s.n] = id
		s.n++
		return true
	}
	s.m = make(map[uint64]struct{}, 4*len(s.small))
	for _, x := range s.small {
		s.m[x] = struct{}{}
	}
	s.m[id] = struct{}{}
	return true
}

// at is where a bucket's pages are in the map: its root page, or its
// inline page. fresh: it has none there (made in this transaction), and
// bbolt reads it from memory only.
type at struct {
	root   uint64
	inline []byte
	fresh  bool
}

// frame is one page on a shadow's path.
type frame struct {
	p   page
	idx int // a branch: the element whose child is next on the path
}

// shadow walks a bucket's pages the way bbolt's cursor will. Make one with
// init, in place (it is a few kilobytes, kept off the heap).
type shadow struct {
	w     *walker
	at    at
	depth int // frames on the path
	stack [maxDepth]frame
	seen  seenSet
	// visit, when set, is called with every page reached (the whole-file
	// walk's own checks).
	visit func(p page) error
}

func (s *shadow) init(w *walker, where at) *shadow {
	s.w, s.at = w, where
	return s
}

func (s *shadow) top() *frame { return &s.stack[s.depth-1] }

// bounds returns the keys a seek routes to the page at stack position fi:
// lo ≤ key < hi (nil: unbounded). The leftmost child of a page takes every
// key below its parent's range too: its lo is its parent's.
func (s *shadow) bounds(fi int) (lo, hi []byte) {
	for i := fi - 1; i >= 0 && (lo == nil || hi == nil); i-- {
		f := &s.stack[i]
		if lo == nil && f.idx > 0 {
			lo = f.p.key(f.idx)
		}
		if hi == nil && f.idx+1 < f.p.n {
			hi = f.p.key(f.idx + 1)
		}
	}
	return lo, hi
}

// reset puts the shadow at the bucket's root page.
func (s *shadow) reset() error {
	s.depth = 0
	var p page
	var err error
	if s.at.root == 0 {
		p, err = inlinePage(s.at.inline)
	} else {
		if !s.seen.add(s.at.root) {
			return errors.Newf("page %d reached twice", s.at.root)
		}
		p, err = s.w.load(s.at.root)
	}
	if err != nil {
		return err
	}
	if s.visit != nil {
		if err := s.visit(p); err != nil {
			return err
		}
	}
	s.stack[0] = frame{p: p}
	s.depth = 1
	return nil
}

// child returns the child of element i of the branch at stack position fi,
// checked: its own checks, not reached before, and its keys inside the
// range its parent gives it.
func (s *shadow) child(fi, i int) (page, error) {
	f := &s.stack[fi]
	if fi+1 >= maxDepth {
		return page{}, errors.Newf("pages nested deeper than %d", maxDepth)
	}
	id := f.p.child(i)
	if !s.seen.add(id) {
		return page{}, errors.Newf("page %d reached twice", id)
	}
	p, err := s.w.load(id)
	if err != nil {
		return page{}, err
	}
	if p.n == 0 {
		return page{}, errors.Newf("page %d has no elements (only a bucket's root may be empty)", id)
	}
	var hi []byte
	if i+1 < f.p.n {
		hi = f.p.key(i + 1)
	} else {
		_, hi = s.bounds(fi)
	}
	if first := p.key(0); bytes.Compare(first, f.p.key(i)) < 0 {
		return page{}, errors.Newf("page %d starts at key %s, below its branch key %s", id, clip(first), clip(f.p.key(i)))
	}
	if last := p.key(p.n - 1); hi != nil && bytes.Compare(last, hi) >= 0 {
		return page{}, errors.Newf("page %d ends at key %s, not below the next branch key %s", id, clip(last), clip(hi))
	}
	if s.visit != nil {
		if err := s.visit(p); err != nil {
			return page{}, err
		}
	}
	return p, nil
}

// down descends to the child of element i of the top page.
func (s *shadow) down(i int) error {
	fi := s.depth - 1
	s.stack[fi].idx = i
	p, err := s.child(fi, i)
	if err != nil {
		return err
	}
	s.stack[s.depth] = frame{p: p}
	s.depth++
	return nil
}

// seek walks the path bbolt's seek for key takes, to a leaf.
func (s *shadow) seek(key []byte) error {
	if err := s.reset(); err != nil {
		return err
	}
	for t := s.top(); !t.p.leaf; t = s.top() {
		if err := s.down(searchBranch(&t.p, key)); err != nil {
			return err
		}
	}
	return nil
}

// first and last walk the leftmost and the rightmost path.
func (s *shadow) first() error {
	if err := s.reset(); err != nil {
		return err
	}
	return s.leftmost()
}

func (s *shadow) last() error {
	if err := s.reset(); err != nil {
		return err
	}
	return s.rightmost()
}

func (s *shadow) leftmost() error {
	for t := s.top(); !t.p.leaf; t = s.top() {
		if err := s.down(0); err != nil {
			return err
		}
	}
	return nil
}

func (s *shadow) rightmost() error {
	for t := s.top(); !t.p.leaf; t = s.top() {
		if err := s.down(t.p.n - 1); err != nil {
			return err
		}
	}
	return nil
}

// next moves to the next leaf, as bbolt's cursor moves past the end of a
// leaf; false at the bucket's last leaf.
func (s *shadow) next() (bool, error) {
	for i := s.depth - 2; i >= 0; i-- {
		if idx := s.stack[i].idx; idx+1 < s.stack[i].p.n {
			s.depth = i + 1
			if err := s.down(idx + 1); err != nil {
				return false, err
			}
			return true, s.leftmost()
		}
	}
	return false, nil
}

// prev moves to the previous leaf; false at the bucket's first leaf.
func (s *shadow) prev() (bool, error) {
	for i := s.depth - 2; i >= 0; i-- {
		if idx := s.stack[i].idx; idx > 0 {
			s.depth = i + 1
			if err := s.down(idx - 1); err != nil {
				return false, err
			}
			return true, s.rightmost()
		}
	}
	return false, nil
}

// siblings checks, at every level of the path, the pages beside the one on
// it: bbolt's rebalance, at the commit of a Delete, merges a node that fell
// under its threshold with one of them.
func (s *shadow) siblings() error {
	for fi := 0; fi < s.depth-1; fi++ {
		f := &s.stack[fi]
		for _, i := range [2]int{f.idx - 1, f.idx + 1} {
			if i >= 0 && i < f.p.n {
				if _, err := s.child(fi, i); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// all walks every page of the bucket.
func (s *shadow) all() error {
	if err := s.first(); err != nil {
		return err
	}
	for {
		more, err := s.next()
		if err != nil || !more {
			return err
		}
	}
}

// cloneTo makes c a copy of s at the same place, having seen the pages on
// its path.
func (s *shadow) cloneTo(c *shadow) *shadow {
	c.init(s.w, s.at)
	c.visit = s.visit
	c.depth = s.depth
	copy(c.stack[:s.depth], s.stack[:s.depth])
	for _, f := range s.stack[:s.depth] {
		if f.p.id != 0 {
			c.seen.add(f.p.id)
		}
	}
	return c
}

// ahead keeps a shadow one leaf ahead of a forward read: before bbolt's
// cursor moves on from key k, the leaf after k's has been walked.
type ahead struct {
	s      shadow
	lastLo []byte // lo of the last leaf walked (nil: the bucket's first)
	end    bool   // the last leaf walked is the bucket's last
}

// start walks the path to from (nil: the first leaf) and the leaf after
// it, where bbolt's Seek goes when from is past the keys of its leaf.
func (a *ahead) start(from []byte) error {
	var err error
	if from == nil {
		err = a.s.first()
	} else {
		err = a.s.seek(from)
	}
	if err != nil {
		return err
	}
	a.lastLo, _ = a.s.bounds(a.s.depth - 1)
	return a.step()
}

func (a *ahead) step() error {
	more, err := a.s.next()
	if err != nil {
		return err
	}
	if !more {
		a.end = true
		return nil
	}
	a.lastLo, _ = a.s.bounds(a.s.depth - 1)
	return nil
}

// before is called before the cursor moves on from key k.
func (a *ahead) before(k []byte) error {
	for !a.end && (a.lastLo == nil || bytes.Compare(k, a.lastLo) >= 0) {
		if err := a.step(); err != nil {
			return err
		}
	}
	return nil
}
