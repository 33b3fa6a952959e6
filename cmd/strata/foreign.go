package main

import (
	"bytes"
	"io"
	"os"
	"unicode/utf8"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend/boltfile"
)

// Kinds of file that sniff recognizes.
const (
	kindSQLite = "a SQLite database"
	kindBolt   = "a bbolt file strata cannot read (another bbolt version, or damaged meta pages)"
	kindGzip   = "gzip-compressed data"
	kindZip    = "a zip archive"
	kindJSON   = "JSON text"
	kindText   = "text"
	kindZeros  = "zero bytes where a database's first page belongs (damaged, or never written): restore a backup, or remove it to start a new one"
)

// sniffBytes is how much of a file sniff reads.
const sniffBytes = 512

// sniff says what kind of file is at path, from its first bytes: one of
// the kind constants, or "" when it does not recognize it.
func sniff(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b := make([]byte, sniffBytes)
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return ""
	}
	b = b[:n]
	switch {
	case bytes.HasPrefix(b, []byte("SQLite format 3\x00")):
		return kindSQLite
	case boltfile.IsBoltFile(path):
		return kindBolt
	case bytes.HasPrefix(b, []byte{0x1f, 0x8b}):
		return kindGzip
	case bytes.HasPrefix(b, []byte("PK\x03\x04")):
		return kindZip
	case len(b) > 0 && len(bytes.TrimLeft(b, "\x00")) == 0:
		return kindZeros
	case bytes.IndexByte(b, 0) >= 0 || !validUTF8Prefix(b):
		return ""
	}
	t := bytes.TrimLeft(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")), " \t\r\n")
	if len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		return kindJSON
	}
	return kindText
}

// validUTF8Prefix reports whether b is UTF-8 but for a rune cut at its end.
func validUTF8Prefix(b []byte) bool {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if utf8.Valid(b) {
			return true
		}
		b = b[:len(b)-1]
	}
	return utf8.Valid(b)
}

// explainForeign adds to an error saying db is not a strata database what
// the file is, when its first bytes say so; of a JSON file, what to do
// with it (the events or transcript it likely holds).
func explainForeign(err error, db, command string) error {
	if isURL(db) {
		return err
	}
	switch kind := sniff(db); {
	case kind == "", kind == kindBolt && len(errors.GetAllHints(err)) > 0: // boltfile said what it is
		return err
	case kind == kindJSON && command == "replay":
		return errors.WithHintf(err, "%s holds JSON text, not a database: replay's first argument is the database (strata replay DB FILE..., or strata replay --db DB FILE...)", shellQuote(db))
	case kind == kindJSON:
		return errors.WithHintf(err, "%s holds JSON text, not a database: to store the events it holds, run: strata replay DB %s (a transcript: strata import)", shellQuote(db), shellQuote(db))
	default:
		return errors.WithHintf(err, "%s is %s", shellQuote(db), kind)
	}
}
