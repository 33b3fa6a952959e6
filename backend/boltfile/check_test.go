package boltfile

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/backend"
)

func check(t *testing.T, b *Backend) (problems []string, safe bool) {
	t.Helper()
	mustView(t, b, func(tx backend.Tx) error {
		var err error
		safe, err = b.Check(tx, func(session, what string) { problems = append(problems, session+": "+what) })
		return err
	})
	return problems, safe
}

func TestCheck_Clean(t *testing.T) {
	b, _ := newDB(t)
	fill(t, b, "s", 2000, 500)
	fill(t, b, "t", 3, 3)
	mustUpdate(t, b, func(tx backend.Tx) error {
		s := mustSession(t, tx, "s")
		for i := uint64(1); i <= 500; i += 2 {
			if err := s.Delete(backend.Nodes, u64(i)); err != nil {
				return err
			}
		}
		return nil
	})
	if problems, safe := check(t, b); len(problems) != 0 || !safe {
		t.Errorf("Check of a sound file: %q, safe %v", problems, safe)
	}
	// A write transaction too.
	mustUpdate(t, b, func(tx backend.Tx) error {
		safe, err := b.Check(tx, func(session, what string) { t.Errorf("Check in a write: %s: %s", session, what) })
		if !safe {
			t.Error("not safe")
		}
		return err
	})
}

// Keys the layout has no place for, and missing tables, are reported with
// their session.
func TestCheck_Layout(t *testing.T) {
	b, path := newDB(t)
	fill(t, b, "s", 3, 0)
	b.Close()
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		s := tx.Bucket([]byte("s/s"))
		if err := s.Put([]byte("stray"), []byte("x")); err != nil {
			return err
		}
		if err := s.DeleteBucket([]byte("audit")); err != nil {
			return err
		}
		if _, err := tx.CreateBucket([]byte("other")); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put([]byte("extra"), []byte("x"))
	})
	b, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	problems, safe := check(t, b)
	if !safe {
		t.Error("not safe")
	}
	all := strings.Join(problems, "\n")
	for _, want := range []string{`: meta: a key "extra"`, `: root: a bucket "other"`, `s: store: database is damaged: session "s" bucket key "stray": a key the layout has no place for`, "s: table audit is missing"} {
		if !strings.Contains(all, want) {
			t.Errorf("Check found\n%s\nwant %q", all, want)
		}
	}
	mustView(t, b, func(tx backend.Tx) error {
		_, err := mustSession(t, tx, "s").Get(backend.Audit, u64(1))
		wantCorrupt(t, "Get of a missing table", err, "s", "bucket missing")
		return nil
	})
}

// Damage under an open handle: a meta page, and the root bucket's page
// (which makes Check unsafe).
func TestCheck_Pages(t *testing.T) {
	b, path := newDB(t)
	fill(t, b, "s", 3, 0)
	b.Close()
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Meta page 0's checksum.
	if _, err := f.WriteAt([]byte{0xAA}, int64(pageHeader+metaChecksum)); err != nil {
		t.Fatal(err)
	}
	problems, safe := check(t, ro)
	if !safe || len(problems) != 1 || !strings.Contains(problems[0], "meta page 0 is damaged (checksum mismatch)") {
		t.Errorf("Check = %q, safe %v; want meta page 0 reported", problems, safe)
	}
	// The root bucket's page: flags of no page.
	root := rootOf(t, path)
	pg := readPage(t, path, root, leafFlag)
	binary.LittleEndian.PutUint16(pg[8:], 0x40)
	if _, err := f.WriteAt(pg, int64(root)*int64(len(pg))); err != nil {
		t.Fatal(err)
	}
	problems, safe = check(t, ro)
	if safe || !strings.Contains(strings.Join(problems, "\n"), "the root bucket, which lists the sessions: damaged page graph") {
		t.Errorf("Check = %q, safe %v; want the root's damage, not safe", problems, safe)
	}
	mustView(t, ro, func(tx backend.Tx) error {
		_, err := tx.Session("s")
		wantCorrupt(t, "Session", err, "s", "flags 0x40")
		err = tx.Sessions(func(string) error { return nil })
		wantCorrupt(t, "Sessions", err, "", "flags 0x40")
		return nil
	})
}

// A read transaction copies the database as one file of its size, which
// opens and checks clean; a write transaction does not offer to.
// (store.DB.BackupFile writes such a copy through WriteFileAtomic.)
func TestBackup(t *testing.T) {
	b, _ := newDB(t)
	fill(t, b, "s", 100, 10)
	dest := filepath.Join(t.TempDir(), "backup.db")
	_, err := WriteFileAtomic(dest, 0o600, func(w io.Writer) (n int64, err error) {
		err = b.View(func(tx backend.Tx) error {
			n, err = tx.(backend.Snapshotter).WriteTo(w)
			return err
		})
		return n, err
	})
	if err != nil {
		t.Fatal(err)
	}
	mustView(t, b, func(tx backend.Tx) error {
		snap := tx.(backend.Snapshotter)
		var buf bytes.Buffer
		n, err := snap.WriteTo(&buf)
		if err != nil || n != snap.Size() || int64(buf.Len()) != n {
			t.Errorf("WriteTo = %d, %v; Size %d", n, err, snap.Size())
		}
		tx.(interface{ ReleaseMapped() }).ReleaseMapped()
		if v, err := mustSession(t, tx, "s").Event(100); err != nil || !bytes.Equal(v, eventText("s", 100)) {
			t.Errorf("a read after ReleaseMapped: %q, %v", v, err)
		}
		return nil
	})
	mustUpdate(t, b, func(tx backend.Tx) error {
		if _, ok := tx.(backend.Snapshotter); ok {
			t.Error("a write transaction is a Snapshotter")
		}
		return nil
	})
	c, err := Open(dest, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if problems, _ := check(t, c); len(problems) != 0 {
		t.Errorf("the backup: %q", problems)
	}
	mustView(t, c, func(tx backend.Tx) error {
		if v, err := mustSession(t, tx, "s").Event(100); err != nil || !bytes.Equal(v, eventText("s", 100)) {
			t.Errorf("the backup's event 100: %q, %v", v, err)
		}
		return nil
	})
}
