package boltfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
	"time"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/backend/internal/placecrc"
)

// Check implements backend.Checker: the structure of the file, below what
// the store's checks read.
//
//   - bbolt's two meta pages and the freelist page, read from the file;
//   - the page graph, every page of the file reached from the root and
//     every leaf read whole, with the checks of the walks (pages.go); a
//     page reached twice, from two sessions too, is reported;
//   - every key shaped as the layout says (tx.go), every table there, and
//     every record's envelope with a correct CRC;
//   - then bbolt's own tx.Check — only if all of that passed: it runs in a
//     goroutine of its own, where a panic or a fault of a damaged file
//     takes the process down, past any guard.
//
// Problems name the session they are in. safe is false when the pages
// that list the sessions are damaged: then no session can be found to
// check. Damage inside a session leaves safe true: the reads of the
// store's checks find it too, as errors.
func (b *Backend) Check(btx backend.Tx, problem func(session, what string)) (safe bool, err error) {
	var t *tx
	switch x := btx.(type) {
	case *tx:
		t = x
	case *viewTx:
		t = x.tx
	default:
		return false, errors.Newf("boltfile: Check of a transaction of another backend (%T)", btx)
	}
	clean := true
	report := func(session, what string) {
		clean = false
		problem(session, what)
	}
	bboltSafe := b.checkMetaPages(t.btx, report)
	if fi, err := os.Stat(b.path); err == nil && fi.Size() < t.btx.Size() {
		report("", fmt.Sprintf("bbolt: the file is %d bytes, shorter than its %d pages of %d bytes", fi.Size(), t.w.hwm, t.w.ps))
		bboltSafe = false
	}
	c := &checker{t: t, report: report}
	safe = c.pages()
	if safe {
		c.records()
	}
	if clean && bboltSafe {
		// tx.Check reads every page in a goroutine of its own: trim the
		// resident set beside it, as the walk above does as it goes.
		stop := releaseEvery(t.w.data, releaseInterval)
		for err := range t.btx.Check() {
			report("", "bbolt: "+err.Error())
		}
		stop()
	}
	// Every page was touched: let them leave the resident set.
	releaseRange(t.w.data)
	return safe, nil
}

// boltMeta is what a meta page says (go.etcd.io/bbolt/internal/common).
type boltMeta struct {
	ok       bool
	why      string
	headerOK bool // the page header is one bbolt's tx.page accepts
	freelist uint64
	pgid     uint64 // the high water mark
	txid     uint64
}

// noFreelist is bbolt's freelist page id when none is written.
const noFreelist = ^uint64(0)

// Offsets in the meta record, after the page header.
const (
	metaPageSize = 8
	metaFreelist = 32
	metaPgid     = 40
	metaTxid     = 48
	metaChecksum = 56
)

func readBoltMeta(f *os.File, page, pageSize int) boltMeta {
	var m boltMeta
	b := make([]byte, pageHeader+metaChecksum+8)
	if _, err := f.ReadAt(b, int64(page*pageSize)); err != nil {
		m.why = fmt.Sprintf("unreadable: %v", err)
		return m
	}
	id, flags := le64(b), le16(b[8:])
	m.headerOK = id == uint64(page) && flags == metaFlag
	meta := b[pageHeader:]
	m.freelist = le64(meta[metaFreelist:])
	m.pgid = le64(meta[metaPgid:])
	m.txid = le64(meta[metaTxid:])
	h := fnv.New64a()
	h.Write(meta[:metaChecksum])
	switch {
	case !m.headerOK:
		m.why = fmt.Sprintf("page header names page %d with flags %#x", id, flags)
	case binary.LittleEndian.Uint32(meta) != boltMagic:
		m.why = "bad magic"
	case binary.LittleEndian.Uint32(meta[4:]) != boltVersion:
		m.why = fmt.Sprintf("version %d", binary.LittleEndian.Uint32(meta[4:]))
	case uint32(pageSize) != binary.LittleEndian.Uint32(meta[metaPageSize:]):
		m.why = fmt.Sprintf("page size %d", binary.LittleEndian.Uint32(meta[metaPageSize:]))
	case h.Sum64() != le64(meta[metaChecksum:]):
		m.why = "checksum mismatch"
	default:
		m.ok = true
	}
	return m
}

// checkMetaPages reports damage to the meta pages and the freelist page,
// read from the file, and returns whether bbolt's tx.Check can read them.
//
// A meta page that fails its checksum is a problem of its own: bbolt then
// silently opens the other meta page, of the transaction before — after a
// power loss mid-commit that is the intended recovery (that commit was
// never acknowledged), but on a file damaged later it means the last
// committed transaction is gone.
func (b *Backend) checkMetaPages(btx *bolt.Tx, report func(session, what string)) (safe bool) {
	pageSize := b.db.Info().PageSize
	f, err := os.Open(b.path)
	if err != nil {
		report("", fmt.Sprintf("bbolt: cannot read the meta pages: %v", err))
		return false
	}
	defer f.Close()
	safe = true
	var metas [2]boltMeta
	for i := range metas {
		metas[i] = readBoltMeta(f, i, pageSize)
		if !metas[i].headerOK {
			safe = false
		}
		if !metas[i].ok {
			report("", fmt.Sprintf("bbolt: meta page %d is damaged (%s): bbolt reads the other one, of transaction %d — if this page held a later commit, that commit is lost",
				i, metas[i].why, btx.ID()))
		}
	}
	// The freelist page of the meta in use: the valid one of the higher
	// transaction, as bbolt picks.
	use := metas[0]
	if !use.ok || (metas[1].ok && metas[1].txid > use.txid) {
		use = metas[1]
	}
	if !use.ok || use.freelist == noFreelist {
		return safe
	}
	var hdr [pageHeader]byte
	switch _, err := f.ReadAt(hdr[:], int64(use.freelist)*int64(pageSize)); {
	case use.freelist >= use.pgid || use.freelist < 2:
		report("", fmt.Sprintf("bbolt: freelist page %d is outside 2..%d", use.freelist, use.pgid-1))
		return false
	case err != nil:
		report("", fmt.Sprintf("bbolt: freelist page %d unreadable: %v", use.freelist, err))
		return false
	}
	if id, flags := le64(hdr[:]), le16(hdr[8:]); id != use.freelist || flags != freelistFlag {
		report("", fmt.Sprintf("bbolt: freelist page %d names page %d with flags %#x", use.freelist, id, flags))
		return false
	}
	if over := uint64(le32(hdr[12:])); over >= use.pgid-use.freelist {
		// tx.Check counts its pages up to the overflow, in a uint32:
		// 0xFFFFFFFF never ends.
		report("", fmt.Sprintf("bbolt: freelist page %d overflows %d pages past the high water mark %d", use.freelist, over, use.pgid))
		return false
	}
	return safe
}

// checker is one run of Check's own walks.
type checker struct {
	t       *tx
	report  func(session, what string)
	w       walker // without a cache: every page is checked
	seen    []uint64
	reached int
	bad     map[string]bool // sessions whose pages are damaged
	touch   byte            // what the touches read, kept so that they happen
	nread   int             // records read (read)
}

// read counts a record the check read, and every releaseAfterRecords lets
// the pages read go from the resident set, as the walk of the pages does.
func (c *checker) read() {
	if c.nread++; c.nread%releaseAfterRecords == 0 {
		releaseRange(c.w.data)
	}
}

// releaseAfterRecords is how many records the check of the records reads
// between two trims of the resident set: some MiB of them.
const releaseAfterRecords = 8192

// maxProblems bounds what one session's records report.
const maxProblems = 100

// pages walks every page reachable from the root, every leaf whole, with
// one record of the pages reached for the whole file, and reports what is
// wrong; false when the root bucket's own pages are damaged.
func (c *checker) pages() bool {
	c.w = c.t.w
	c.w.known = nil
	c.seen = make([]uint64, (c.w.hwm+63)/64)
	c.bad = map[string]bool{}
	var rootErr error
	err := guard(func() error {
		rootErr = c.bucket(c.t.rootAt(), func(k, v []byte, sub at) {
			switch {
			case bytes.Equal(k, bucketMeta):
				if err := c.walk(sub, nil); err != nil {
					c.report("", fmt.Sprintf("meta: damaged page graph: %v", err))
				}
			case bytes.HasPrefix(k, sessionPrefix) && len(k) > len(sessionPrefix):
				id := string(k[len(sessionPrefix):])
				if err := guard(func() error { return c.session(sub) }); err != nil {
					c.bad[id] = true
					c.report(id, fmt.Sprintf("damaged page graph: %v", err))
				}
			}
		})
		return nil
	})
	if err == nil {
		err = rootErr
	}
	if err != nil {
		c.report("", fmt.Sprintf("the root bucket, which lists the sessions: damaged page graph: %v", err))
		return false
	}
	return true
}

// bucket walks the bucket at where, calling fn with every bucket element
// of its leaves.
func (c *checker) bucket(where at, fn func(k, v []byte, sub at)) error {
	s := new(shadow).init(&c.w, where)
	s.seen.bits = c.seen
	s.visit = func(p page) error {
		c.reached++
		if c.reached%releaseAfterPages == 0 {
			releaseRange(c.w.data)
		}
		// Touch every memory page of it: a read that fails (EIO) faults
		// here, under guard, not in tx.Check's goroutine.
		for off := 0; off < len(p.b); off += 4096 {
			c.touch ^= p.b[off]
		}
		if !p.leaf || fn == nil {
			return nil
		}
		for i := 0; i < p.n; i++ {
			if p.leafFlags(i)&bucketLeafFlag == 0 {
				continue
			}
			v := p.value(i)
			sub := at{root: le64(v)}
			if sub.root == 0 {
				sub.inline = v[bucketHeader:]
			}
			fn(p.key(i), v, sub)
		}
		return nil
	}
	return s.all()
}

// walk walks a bucket that holds no buckets of strata's; fn, if set, is
// called with any bucket in it.
func (c *checker) walk(where at, fn func(k []byte)) error {
	return c.bucket(where, func(k, _ []byte, sub at) {
		if fn != nil {
			fn(k)
		}
	})
}

// session walks a session's bucket and its tables.
func (c *checker) session(where at) error {
	if where.root == 0 {
		return errors.New("session bucket stored inline")
	}
	var inner error
	err := c.bucket(where, func(k, _ []byte, sub at) {
		if inner != nil {
			return
		}
		if tableOf(k) == 0 {
			return // reported by records
		}
		if err := c.walk(sub, nil); err != nil {
			inner = errors.Wrapf(err, "table %s", clip(k))
		}
	})
	if err != nil {
		return err
	}
	return inner
}

// tableOf returns the table whose bucket key k is, or 0.
func tableOf(k []byte) backend.Table {
	for tb := backend.Table(1); tb < backend.Tables; tb++ {
		if bytes.Equal(k, tableKey(tb)) {
			return tb
		}
	}
	return 0
}

// records reads every key and value through bbolt's cursors and reports
// what the layout has no place for and every envelope that does not check.
func (c *checker) records() {
	err := guard(func() error {
		cur := c.t.btx.Cursor()
		for k, v := cur.First(); k != nil; k, v = cur.Next() {
			switch {
			case v != nil:
				c.report("", fmt.Sprintf("root: a value at key %s, where only buckets are", clip(k)))
			case bytes.Equal(k, bucketMeta):
				c.meta(c.t.btx.Bucket(k))
			case bytes.HasPrefix(k, sessionPrefix) && len(k) > len(sessionPrefix):
				id := string(k[len(sessionPrefix):])
				if c.bad[id] {
					continue
				}
				if err := guard(func() error { c.sessionRecords(id, c.t.btx.Bucket(k)); return nil }); err != nil {
					c.report(id, err.Error())
				}
			default:
				c.report("", fmt.Sprintf("root: a bucket %s that is neither meta nor a session", clip(k)))
			}
		}
		return nil
	})
	if err != nil {
		c.report("", err.Error())
	}
}

func (c *checker) meta(m *bolt.Bucket) {
	cur := m.Cursor()
	found := false
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		switch {
		case !bytes.Equal(k, keyVersion):
			c.report("", fmt.Sprintf("meta: a key %s the layout has no place for", clip(k)))
		case v == nil:
			c.report("", "meta: a bucket at key \"version\"")
		default:
			found = true
			if _, err := decodeMeta(v); err != nil {
				c.report("", fmt.Sprintf("meta key \"version\": %v", err))
			}
		}
	}
	if !found {
		c.report("", "meta: no meta record")
	}
}

// sessionRecords checks session id's bucket b.
func (c *checker) sessionRecords(id string, b *bolt.Bucket) {
	n := 0
	report := func(what string) bool {
		if n++; n <= maxProblems {
			c.report(id, what)
		} else if n == maxProblems+1 {
			c.report(id, "more problems, not shown")
		}
		return n <= maxProblems
	}
	crc := placecrc.Session(id)
	var tables [backend.Tables]bool
	cur := b.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		c.read()
		if tb := tableOf(k); tb != 0 {
			if v != nil {
				report(fmt.Sprintf("a value where table %s's bucket was expected", tb))
				continue
			}
			tables[tb] = true
			tc := b.Bucket(k).Cursor()
			for tk, tv := tc.First(); tk != nil; tk, tv = tc.Next() {
				c.read()
				var err error
				if tv == nil {
					err = errors.New("a bucket inside a table")
				} else {
					_, err = unseal(identity(crc, byte(tb), tk), tv)
				}
				if err != nil && !report(backend.Corrupt(id, tb.String(), tk, err).Error()) {
					return
				}
			}
			continue
		}
		var err error
		where, key := "l0", k // the raw log, by seq, as the store names it
		switch {
		case v == nil:
			err = errors.New("a bucket the layout has no place for")
			where = "bucket"
		case k[0] == eventPrefix && len(k) == eventKeyLen:
			_, err = unseal(identity(crc, codeEvent, k), v)
			key = k[1:]
		case k[0] == eventPrefix:
			err = errors.Newf("an event key of %d bytes", len(k))
		case bytes.Equal(k, keyState):
			where = "state"
			_, err = unseal(identity(crc, codeState, k), v)
		default:
			err = errors.New("a key the layout has no place for")
			where = "bucket"
		}
		if err != nil && !report(backend.Corrupt(id, where, key, err).Error()) {
			return
		}
	}
	for tb := backend.Table(1); tb < backend.Tables; tb++ {
		if !tables[tb] {
			report(fmt.Sprintf("table %s is missing", tb))
		}
	}
}

// releaseInterval is how often the resident set is trimmed while bbolt's
// tx.Check runs: at the speed it reads, a few tens of MiB.
const releaseInterval = 50 * time.Millisecond

// releaseEvery calls releaseRange(b) every d until stop is called.
func releaseEvery(b []byte, d time.Duration) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				releaseRange(b)
			}
		}
	}()
	return func() { close(done); <-exited }
}

// releaseAfterPages is how many pages Check's walk may touch before it
// asks the kernel to drop them from the process's resident set.
const releaseAfterPages = 1024
