package store

import (
	"encoding/binary"
	"fmt"
	"github.com/cockroachdb/errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/tier"
)

// TestVerify_FindsUnseekableKeys damages one key of a branch page so that
// the page still sorts but sends seeks for part of its left child to the
// wrong leaf: iteration (and so a replay) still sees every event, a read by
// seq does not. Verify must say so.
func TestVerify_FindsUnseekableKeys(t *testing.T) {
	for _, format := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("format %d", format), func(t *testing.T) {
			path, f, root, page := l0BranchPage(t, format)
			key := func(i int) []byte {
				off := boltPageHeader + i*boltElement
				pos, ksize := binary.LittleEndian.Uint32(page[off:]), binary.LittleEndian.Uint32(page[off+4:])
				return page[off+int(pos) : off+int(pos)+int(ksize)]
			}
			// Two branch keys that are event keys: format 2's first leaf
			// starts with the bucket names.
			i, seqAt := 0, 0
			switch format {
			case 2:
				for key(i)[0] != eventPrefix {
					i++
				}
				seqAt = 1
			case 3: // <n> 0xFE <seq>, session s's first
				seqAt = 5
			}
			first, second := binary.BigEndian.Uint64(key(i)[seqAt:]), binary.BigEndian.Uint64(key(i + 1)[seqAt:])
			if second-first < 3 {
				t.Fatalf("first leaf too small: keys %d, %d", first, second)
			}
			// Still above the first key, so the page sorts; below the second
			// leaf's first key, so seeks for the first leaf's tail go there.
			binary.BigEndian.PutUint64(key(i + 1)[seqAt:], first+1)
			if _, err := f.WriteAt(page, int64(root)*int64(len(page))); err != nil {
				t.Fatal(err)
			}
			rep := verifyWithin(t, path)
			found := false
			for _, p := range rep.Problems {
				if strings.Contains(p.What, "not found by a seek") {
					found = true
				}
			}
			if !found {
				t.Fatalf("Verify did not report the unseekable key; problems: %v", rep.Problems)
			}
		})
	}
}

// TestVerify_PageCycleIsAProblemNotAHang points a branch page at itself:
// every cursor that descends there would loop forever. Verify must report
// the damaged page graph and return.
func TestVerify_PageCycleIsAProblemNotAHang(t *testing.T) {
	for _, format := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("format %d", format), func(t *testing.T) {
			path, f, root, page := l0BranchPage(t, format)
			binary.LittleEndian.PutUint64(page[boltPageHeader+boltElement+8:], root) // element 1's child: the page itself
			if _, err := f.WriteAt(page, int64(root)*int64(len(page))); err != nil {
				t.Fatal(err)
			}
			rep := verifyWithin(t, path)
			if len(rep.Problems) == 0 || !strings.Contains(rep.Problems[len(rep.Problems)-1].What, "reached twice") {
				t.Fatalf("problems %v, want the page reached twice", rep.Problems)
			}
		})
	}
}

// verifyWithin runs Verify on the database at path and fails the test if it
// takes more than a few seconds (a hang).
func verifyWithin(t *testing.T, path string) Report {
	t.Helper()
	db, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		rep Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := db.Verify(VerifyOptions{})
		done <- result{rep, err}
	}()
	select {
	case r := <-done:
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.rep
	case <-time.After(20 * time.Second):
		t.Fatal("Verify hangs")
	}
	return Report{}
}

// l0BranchPage makes a database of format whose session "s" has its events
// in several leaves under one branch page — format 1's l0 bucket, format 2's
// session bucket — and a session "t" of 5 events, and returns the file open for
// writing, that page's id and its bytes.
func l0BranchPage(t *testing.T, format int) (path string, f *os.File, root uint64, page []byte) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "strata.db")
	db, err := Open(path, Options{Create: true, NoSync: true, Format: format})
	if err != nil {
		t.Fatal(err)
	}
	evs := appendRuns(t, db, "s")
	if _, err := db.Append("t", evs[:5]...); err != nil { // a session left intact
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Find the l0 bucket's root page: a branch page over the leaves.
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.View(func(tx *bolt.Tx) error {
		switch format {
		case 1:
			root = uint64(tx.Bucket(bucketSessions).Bucket([]byte("s")).Bucket(bucketL0).Root())
		case 2:
			root = uint64(tx.Bucket(sessionKey("s")).Root())
		default: // every session's events, s's first
			root = uint64(tx.Bucket(bucketEvents3).Root())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	pageSize := int64(bdb.Info().PageSize)
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
	f, err = os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	page = make([]byte, pageSize)
	if _, err := f.ReadAt(page, int64(root)*pageSize); err != nil {
		t.Fatal(err)
	}
	if flags, count := binary.LittleEndian.Uint16(page[8:]), binary.LittleEndian.Uint16(page[10:]); flags != boltBranchFlag || count < 2 {
		t.Fatalf("l0 root page %d: flags %#x count %d, want a branch page of 2 or more", root, flags, count)
	}
	return path, f, root, page
}

// TestVerify_BranchKeyPastThePage points a branch element's key far past
// its page: bbolt's tx.Check would slice the map out of range in a
// goroutine of its own and take the process down. Verify's walk must
// refuse the page first, and the first read's check too.
func TestVerify_BranchKeyPastThePage(t *testing.T) {
	for _, format := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("format %d", format), func(t *testing.T) {
			path, f, root, page := l0BranchPage(t, format)
			binary.LittleEndian.PutUint32(page[boltPageHeader+boltElement:], 1<<31) // element 1's key position
			if _, err := f.WriteAt(page, int64(root)*int64(len(page))); err != nil {
				t.Fatal(err)
			}
			rep := verifyWithin(t, path)
			if len(rep.Problems) == 0 || !strings.Contains(rep.Problems[len(rep.Problems)-1].What, "past the page") {
				t.Fatalf("problems %v, want the branch element past the page", rep.Problems)
			}
			db, err := Open(path, Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Info("s"); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "past the page") {
				t.Fatalf("Info = %v, want ErrCorrupt naming the element past the page", err)
			}
		})
	}
}

// appendRuns appends 30 runs of 100 events of 100 bytes to session: enough
// for a bucket of a few levels. It returns one run's events.
func appendRuns(t *testing.T, db *DB, session string) []tier.Event {
	t.Helper()
	evs := make([]tier.Event, 100)
	for i := range evs {
		evs[i] = tier.Event{Kind: tier.KindAssistant, Text: strings.Repeat("x", 100)}
	}
	for i := 0; i < 30; i++ {
		if _, err := db.Append(session, evs...); err != nil {
			t.Fatal(err)
		}
	}
	return evs
}
