package boltfile

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/backend"
)

// hintsOf returns the error's hints, which a user reads: they must not
// name Go identifiers.
func hintsOf(t *testing.T, err error) string {
	t.Helper()
	h := strings.Join(errors.GetAllHints(err), "\n")
	for _, bad := range []string{"Options", "Create:", "ReadOnly", "LockTimeout", "boltfile."} {
		if strings.Contains(h, bad) {
			t.Errorf("hint %q names %q", h, bad)
		}
	}
	return h
}

func TestOpen_Errors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A bbolt file of some other program.
	other := filepath.Join(dir, "other.db")
	bdb, err := bolt.Open(other, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("widgets"))
		if err != nil {
			return err
		}
		return b.Put([]byte("a"), []byte("b"))
	}); err != nil {
		t.Fatal(err)
	}
	bdb.Close()
	// A bbolt file with an empty meta bucket.
	noMeta := filepath.Join(dir, "nometa.db")
	bdb, err = bolt.Open(noMeta, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucketMeta); return err }); err != nil {
		t.Fatal(err)
	}
	bdb.Close()

	for _, tc := range []struct {
		name string
		path string
		opts Options
		want error
		says []string
		hint string
	}{
		{"missing", filepath.Join(dir, "missing.db"), Options{}, backend.ErrNotExist, []string{"missing.db"}, "creates one"},
		{"empty", write("empty.db", nil), Options{}, backend.ErrEmptyFile, []string{"empty.db"}, "zero-length"},
		{"empty with create", write("empty2.db", nil), Options{Create: true}, backend.ErrEmptyFile, []string{"empty2.db"}, "zero-length"},
		{"directory", dir, Options{}, backend.ErrNotStrata, []string{"directory"}, ""},
		{"text", write("text.db", []byte(strings.Repeat("not a database\n", 1000))), Options{}, backend.ErrNotStrata, []string{"text.db"}, ""},
		{"short text", write("short.db", []byte("hello")), Options{}, backend.ErrNotStrata, []string{"short.db"}, ""},
		{"bbolt of another program", other, Options{}, backend.ErrNotStrata, []string{"meta record"}, "not written by strata"},
		{"bbolt with an empty meta bucket", noMeta, Options{ReadOnly: true}, backend.ErrNotStrata, []string{"meta record"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Open(tc.path, tc.opts)
			if err == nil {
				b.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open = %v, want %v", err, tc.want)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Open = %v, want it to say %q", err, s)
				}
			}
			if h := hintsOf(t, err); !strings.Contains(h, tc.hint) {
				t.Errorf("hint %q, want it to say %q", h, tc.hint)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !os.IsNotExist(err) {
		t.Errorf("a failed Open left a file: %v", err)
	}
	if _, err := Open(filepath.Join(dir, "x.db"), Options{Create: true, ReadOnly: true}); err == nil {
		t.Error("Create and ReadOnly together: no error")
	}
}

// TestOpen_Formats: files of format 5 (the store before this package,
// with its meta record at meta/format), of the format before this one and
// of the one after it are refused, naming the file's format and this one's.
func TestOpen_Formats(t *testing.T) {
	dir := t.TempDir()
	// Format 5, as the old store wrote it: a 10-byte envelope (version 1,
	// type 1, length, CRC32C) around msgpack {"v":1,"f":5,...}.
	v5 := filepath.Join(dir, "v5.db")
	bdb, err := bolt.Open(v5, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		m, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		if err := m.Put(keyFormatOld, oldMeta(t, 5)); err != nil {
			return err
		}
		_, err = tx.CreateBucket([]byte("e"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	bdb.Close()
	// The format before this one and the one after it: databases of this
	// one with their meta record rewritten.
	rewritten := func(format int) string {
		path := filepath.Join(dir, fmt.Sprintf("v%d.db", format))
		b, err := Open(path, Options{Create: true, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
		rawUpdate(t, path, func(tx *bolt.Tx) error {
			v, err := encodeMeta(metaRecord{Format: format, CreatedBy: "strata"})
			if err != nil {
				return err
			}
			return tx.Bucket(bucketMeta).Put(keyVersion, v)
		})
		return path
	}
	older, newer := rewritten(MinFormatVersion-1), rewritten(FormatVersion+1)
	reads := fmt.Sprintf("; this strata reads format %d", FormatVersion)

	for _, tc := range []struct {
		path string
		want error
		says string
		hint string
	}{
		{v5, backend.ErrFormatTooOld, "has format 5" + reads, "strata dump --json"},
		{older, backend.ErrFormatTooOld, fmt.Sprintf("has format %d", MinFormatVersion-1) + reads, "strata dump --json"},
		{newer, backend.ErrFormatTooNew, fmt.Sprintf("has format %d", FormatVersion+1) + reads, "newer strata"},
	} {
		for _, ro := range []bool{false, true} {
			b, err := Open(tc.path, Options{ReadOnly: ro})
			if err == nil {
				b.Close()
				t.Fatalf("%s: Open succeeded", tc.path)
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), tc.path) {
				t.Errorf("%s: Open = %v, want %v saying %q", tc.path, err, tc.want, tc.says)
			}
			if h := hintsOf(t, err); !strings.Contains(h, tc.hint) {
				t.Errorf("%s: hint %q, want %q", tc.path, h, tc.hint)
			}
		}
	}
}

// oldMeta returns a meta record of the old store's formats.
func oldMeta(t *testing.T, format int) []byte {
	t.Helper()
	// msgpack: fixmap of 2: "v": 1, "f": format.
	payload := []byte{0x82, 0xa1, 'v', 0x01, 0xa1, 'f', byte(format)}
	b := make([]byte, 10, 10+len(payload))
	b[0], b[1] = 1, 1
	b[2], b[3], b[4], b[5] = 0, 0, 0, byte(len(payload))
	b = append(b, payload...)
	crc := crc32Update(crc32Checksum(b[:6]), b[10:])
	b[6], b[7], b[8], b[9] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
	return b
}

// A damaged meta record is damage, not a foreign file.
func TestOpen_DamagedMeta(t *testing.T) {
	b, path := newDB(t)
	b.Close()
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		v := append([]byte(nil), m.Get(keyVersion)...)
		v[0] ^= 1
		return m.Put(keyVersion, v)
	})
	_, err := Open(path, Options{})
	var ce *backend.CorruptError
	if !errors.Is(err, backend.ErrCorrupt) || !errors.As(err, &ce) || ce.Bucket != "meta" {
		t.Fatalf("Open = %v, want a CorruptError in meta", err)
	}
}

// A database reopens, read-only too, and what it holds is there; a
// read-only handle refuses writes.
func TestOpen_Reopen(t *testing.T) {
	b, path := newDB(t)
	fill(t, b, "s", 10, 3)
	if !strings.HasSuffix(b.Path(), "strata.db") || b.ReadOnly() {
		t.Errorf("Path %q ReadOnly %v", b.Path(), b.ReadOnly())
	}
	if n, err := b.FileSize(); err != nil || n == 0 {
		t.Errorf("FileSize = %d, %v", n, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if !ro.ReadOnly() {
		t.Error("ReadOnly false")
	}
	mustView(t, ro, func(tx backend.Tx) error {
		v, err := mustSession(t, tx, "s").Event(10)
		if err != nil || string(v) != string(eventText("s", 10)) {
			t.Errorf("Event(10) = %q, %v", v, err)
		}
		return nil
	})
	if err := ro.Update(func(backend.Tx) error { return nil }); !errors.Is(err, backend.ErrReadOnly) {
		t.Errorf("Update on a read-only handle = %v, want ErrReadOnly", err)
	}
	// A second reader beside the first.
	ro2, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	ro2.Close()
}

// TestOpen_FileRemovedWhileWaiting: a file removed from its path while an
// Open waited for its lock (a command that made it and failed removes it
// while it holds the lock) is not the database: Open looks again, and makes
// a new one when asked to create, or says there is none.
func TestOpen_FileRemovedWhileWaiting(t *testing.T) {
	for _, create := range []bool{true, false} {
		path := filepath.Join(t.TempDir(), "strata.db")
		b, err := Open(path, Options{Create: true, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
		removed := 0
		setHook(t, func(step string) error {
			if step == "open:locked" && removed == 0 {
				removed++
				return os.Remove(path)
			}
			return nil
		})
		b, err = Open(path, Options{Create: create, NoSync: true})
		if !create {
			if !errors.Is(err, backend.ErrNotExist) {
				t.Fatalf("without create: Open = %v, want ErrNotExist", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("with create: Open = %v", err)
		}
		if removed != 1 {
			t.Fatalf("removed %d times", removed)
		}
		// The database opened is the file at the path.
		if err := b.Update(func(tx backend.Tx) error { _, err := tx.CreateSession("s"); return err }); err != nil {
			t.Fatal(err)
		}
		b.Close()
		b, err = Open(path, Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		err = b.View(func(tx backend.Tx) error {
			s, err := tx.Session("s")
			if err == nil && s == nil {
				err = errors.New("the session written is not in the file at the path")
			}
			return err
		})
		b.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A damaged root page is damage, not a foreign file: a lost write that
// leaves another bucket's old page where the root's belongs (its header
// naming the root's id, as the page last written there did) lists no meta
// record, but records where bbolt's root holds buckets only.
func TestOpen_DamagedRootPage(t *testing.T) {
	b, path := newDB(t)
	fill(t, b, "s", 150, 0)
	b.Close()
	root := rootOf(t, path)
	id := rootOf(t, path, "s/s")
	p := readPage(t, path, id, -1)
	for le16(p[8:]) == branchFlag {
		id = (&page{b: p, n: le16(p[10:])}).child(0)
		p = readPage(t, path, id, -1)
	}
	binary.LittleEndian.PutUint64(p, root)
	writePage(t, path, root, p)
	_, err := Open(path, Options{ReadOnly: true})
	var ce *backend.CorruptError
	if !errors.Is(err, backend.ErrCorrupt) || !errors.As(err, &ce) || ce.Bucket != "root" || errors.Is(err, backend.ErrNotStrata) {
		t.Fatalf("Open = %v, want a CorruptError in root", err)
	}
	if h := hintsOf(t, err); !strings.Contains(h, "root page is damaged") {
		t.Errorf("hint %q, want it to say the root page is damaged", h)
	}
}

// Both meta pages damaged — the first's magic number, the second's
// checksum — is damage too: the second still starts as bbolt's.
func TestOpen_DamagedMetaPages(t *testing.T) {
	b, path := newDB(t)
	b.Close()
	ps := os.Getpagesize()
	p0 := readPage(t, path, 0, -1)
	p0[pageHeader] ^= 0x01 // the magic number
	writePage(t, path, 0, p0)
	p1 := readPage(t, path, 1, -1)
	p1[pageHeader+24] ^= 0x01 // the root bucket's sequence: the checksum breaks
	writePage(t, path, 1, p1)
	_, err := Open(path, Options{ReadOnly: true})
	if !errors.Is(err, backend.ErrCorrupt) || errors.Is(err, backend.ErrNotStrata) || !strings.Contains(err.Error(), "meta pages are damaged") {
		t.Fatalf("Open (page size %d) = %v, want ErrCorrupt saying both meta pages are damaged", ps, err)
	}
}

// Created is true of the Open that made the file alone; DropEmpty removes
// that file while it holds no session, and nothing else.
func TestDropEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	open := func() *Backend {
		b, err := Open(path, Options{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := open()
	if !b.Created() {
		t.Fatal("Created is false of the Open that made the file")
	}
	mustUpdate(t, b, func(tx backend.Tx) error { _, err := tx.CreateSession("s"); return err })
	if dropped, err := b.DropEmpty(); err != nil || dropped {
		t.Fatalf("DropEmpty of a file holding a session: %v %v", dropped, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the file holding a session: %v", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}

	b = open()
	if dropped, err := b.DropEmpty(); err != nil || !dropped {
		t.Fatalf("DropEmpty of the empty file it made: %v %v", dropped, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the empty file it made is there: %v", err)
	}
	_ = b.Close()

	// A file that was there: not Created, never removed.
	_ = open().Close()
	b = open()
	defer b.Close()
	if b.Created() {
		t.Error("Created is true of an Open of a file that was there")
	}
	if dropped, err := b.DropEmpty(); err != nil || dropped {
		t.Fatalf("DropEmpty of a file that was there: %v %v", dropped, err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the file that was there: %v", err)
	}
}
