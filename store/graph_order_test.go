package store

import (
	"encoding/binary"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
)

// TestGraph_OutOfOrderBranchKeysAreCorrupt: the first-read check decides
// which children of a session's branch page a seek for one of its buckets
// can reach from the branch keys, which holds only if they are sorted:
// bbolt's binary search on unsorted keys (damage) can land elsewhere. The
// walk refuses a branch page whose keys are out of order. Here the session
// bucket's branch page has keys "art", "nodez", "nodes", "\xff": the walk
// routes "nodes" to elements 0 and 2 and reads element 1's leaf by its
// header only, but bbolt's search for "nodes" lands on element 1 (it met
// "nodes" exactly, then moved left to "nodez"). That leaf holds a bucket
// "nodes" whose root is a page the walk never saw: a branch page pointing
// at itself. Without the order check, Snapshot.Node recursed until the
// stack overflowed and the process died; now it gets ErrCorrupt. The read
// runs in a child process, so that a regression fails this test and not the
// whole test binary.
func TestGraph_OutOfOrderBranchKeysAreCorrupt(t *testing.T) {
	if path := os.Getenv("STRATA_GRAPH_ORDER_CHILD"); path != "" {
		debug.SetMaxStack(64 << 20) // die quickly, not after a GiB of stack
		db, err := Open(path, Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		err = db.View(func(s *Snapshot) error { _, err := s.Node("s", 1); return err })
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Node = %v, want ErrCorrupt", err)
		}
		t.Logf("CHILD-OK: %v", err)
		return
	}
	path, f, root, page := l0BranchPage(t, 2)
	pageSize := len(page)
	count := int(binary.LittleEndian.Uint16(page[10:]))
	if count < 6 {
		t.Fatalf("branch page with %d elements, want 6 or more", count)
	}
	child := func(i int) uint64 { return binary.LittleEndian.Uint64(page[boltPageHeader+i*boltElement+8:]) }
	c0, x, loop, cLast, cPrev := child(0), child(1), child(2), child(count-1), child(count-2)

	// The branch page: four elements, keys out of order.
	keys := []string{"art", "nodez", "nodes", "\xff"}
	kids := []uint64{c0, x, cLast, cPrev}
	br := make([]byte, pageSize)
	binary.LittleEndian.PutUint64(br, root)
	binary.LittleEndian.PutUint16(br[8:], boltBranchFlag)
	binary.LittleEndian.PutUint16(br[10:], uint16(len(keys)))
	data := boltPageHeader + len(keys)*boltElement
	for i, k := range keys {
		off := boltPageHeader + i*boltElement
		binary.LittleEndian.PutUint32(br[off:], uint32(data-off))
		binary.LittleEndian.PutUint32(br[off+4:], uint32(len(k)))
		binary.LittleEndian.PutUint64(br[off+8:], kids[i])
		data += copy(br[data:], k)
	}
	rewritePage(t, f, root, br)

	// Leaf x: one bucket element "nodes" whose root is page loop.
	lf := make([]byte, pageSize)
	binary.LittleEndian.PutUint64(lf, x)
	binary.LittleEndian.PutUint16(lf[8:], boltLeafFlag)
	binary.LittleEndian.PutUint16(lf[10:], 1)
	off := boltPageHeader
	binary.LittleEndian.PutUint32(lf[off:], boltBucketLeafFlag)
	binary.LittleEndian.PutUint32(lf[off+4:], boltElement)
	binary.LittleEndian.PutUint32(lf[off+8:], 5)
	binary.LittleEndian.PutUint32(lf[off+12:], boltBucketHeader)
	copy(lf[off+boltElement:], "nodes")
	binary.LittleEndian.PutUint64(lf[off+boltElement+5:], loop)
	rewritePage(t, f, x, lf)

	// Page loop: a branch page whose one element points at itself.
	lp := make([]byte, pageSize)
	binary.LittleEndian.PutUint64(lp, loop)
	binary.LittleEndian.PutUint16(lp[8:], boltBranchFlag)
	binary.LittleEndian.PutUint16(lp[10:], 1)
	binary.LittleEndian.PutUint32(lp[boltPageHeader:], boltElement)
	binary.LittleEndian.PutUint32(lp[boltPageHeader+4:], 1)
	binary.LittleEndian.PutUint64(lp[boltPageHeader+8:], loop)
	lp[boltPageHeader+boltElement] = 'a'
	rewritePage(t, f, loop, lp)

	cmd := exec.Command(os.Args[0], "-test.run=^TestGraph_OutOfOrderBranchKeysAreCorrupt$", "-test.v")
	cmd.Env = append(os.Environ(), "STRATA_GRAPH_ORDER_CHILD="+path)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the read hangs")
	}
	if err != nil || !strings.Contains(string(out), "CHILD-OK") {
		s := string(out)
		if i := strings.Index(s, "\ngoroutine "); i > 0 {
			s = s[:i]
		}
		t.Fatalf("the read on the damaged file took the process down (%v):\n%s", err, s[:min(len(s), 2000)])
	}
}
