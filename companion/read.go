package companion

import (
	"bytes"
	"encoding/json"
	"io"
	"os"

	"github.com/cockroachdb/errors"
)

// scanBlock is how much of the transcript a backward search reads at a
// time.
const scanBlock = 1 << 20

// TranscriptFile is an agent's transcript (JSONL) open for reading, up to
// the end of its last whole line: the agent appends while a hook runs,
// and a line it has not finished is left for the next run.
type TranscriptFile struct {
	f    *os.File
	path string
	end  int64 // the offset after the last whole line
}

// OpenTranscriptFile opens the transcript at path for reading up to the
// end of its last whole line.
func OpenTranscriptFile(path string) (*TranscriptFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errors.Wrap(err, "companion: opening the transcript")
	}
	t := &TranscriptFile{f: f, path: path}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, errors.Wrapf(err, "companion: transcript %s", path)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, errors.Newf("companion: transcript %s is not a regular file", path)
	}
	if t.end, err = t.wholeEnd(fi.Size()); err != nil {
		f.Close()
		return nil, err
	}
	return t, nil
}

// Close closes the file.
func (t *TranscriptFile) Close() error { return t.f.Close() }

// wholeEnd returns the offset after the last newline before size, or size
// when what follows it is a whole JSON value (a file whose last line has
// no newline), or when the file is one JSON document over many lines
// whose last line has no newline (a chat of Gemini CLI before its JSONL,
// session-*.json, written whole).
func (t *TranscriptFile) wholeEnd(size int64) (int64, error) {
	nl, err := t.lastByte('\n', size)
	if err != nil {
		return 0, err
	}
	if nl+1 == size {
		return size, nil
	}
	rest := make([]byte, size-(nl+1))
	if _, err := t.f.ReadAt(rest, nl+1); err != nil {
		return 0, errors.Wrapf(err, "companion: reading transcript %s", t.path)
	}
	if json.Valid(rest) {
		return size, nil
	}
	if nl < 0 {
		return 0, nil
	}
	// A JSONL file's first line is a whole value; a document's is not.
	first, err := t.nextByte('\n', 0, size)
	if err != nil {
		return 0, err
	}
	head := make([]byte, first)
	if _, err := t.f.ReadAt(head, 0); err != nil {
		return 0, errors.Wrapf(err, "companion: reading transcript %s", t.path)
	}
	if !json.Valid(head) {
		whole := make([]byte, size)
		if _, err := t.f.ReadAt(whole, 0); err != nil {
			return 0, errors.Wrapf(err, "companion: reading transcript %s", t.path)
		}
		if json.Valid(whole) {
			return size, nil
		}
	}
	return nl + 1, nil
}

// lastByte returns the offset of the last c before off, or -1.
func (t *TranscriptFile) lastByte(c byte, off int64) (int64, error) {
	buf := make([]byte, 64<<10)
	for off > 0 {
		lo := max(0, off-int64(len(buf)))
		b := buf[:off-lo]
		if _, err := t.f.ReadAt(b, lo); err != nil {
			return 0, errors.Wrapf(err, "companion: reading transcript %s", t.path)
		}
		if i := bytes.LastIndexByte(b, c); i >= 0 {
			return lo + int64(i), nil
		}
		off = lo
	}
	return -1, nil
}

// nextByte returns the offset of the first c at or after off and before
// end, or end.
func (t *TranscriptFile) nextByte(c byte, off, end int64) (int64, error) {
	buf := make([]byte, 64<<10)
	for off < end {
		b := buf[:min(int64(len(buf)), end-off)]
		if _, err := t.f.ReadAt(b, off); err != nil {
			return 0, errors.Wrapf(err, "companion: reading transcript %s", t.path)
		}
		if i := bytes.IndexByte(b, c); i >= 0 {
			return off + int64(i), nil
		}
		off += int64(len(b))
	}
	return end, nil
}

// line returns the whole line holding offset off, and the offset after it
// (after its newline).
func (t *TranscriptFile) line(off int64) (line []byte, next int64, err error) {
	start, err := t.lastByte('\n', off)
	if err != nil {
		return nil, 0, err
	}
	start++
	stop, err := t.nextByte('\n', off, t.end)
	if err != nil {
		return nil, 0, err
	}
	line = make([]byte, stop-start)
	if _, err := t.f.ReadAt(line, start); err != nil {
		return nil, 0, errors.Wrapf(err, "companion: reading transcript %s", t.path)
	}
	return line, min(stop+1, t.end), nil
}

// Path returns the transcript's path.
func (t *TranscriptFile) Path() string { return t.path }

// FindLast searches the transcript backwards from its end for the last
// line holding pat whose record passes ok, and returns the line and the
// offset after it; found is false when there is none. pat is a JSON
// string, quotes included (JSONString): inside another string its quotes
// would be escaped, so each hit is a string of the record's JSON (a value
// or a key, of the record or of an object in it), and ok, parsing the
// line, tells whether it is the one looked for.
func (t *TranscriptFile) FindLast(pat string, ok func(line []byte) bool) (line []byte, next int64, found bool, err error) {
	p := []byte(pat)
	buf := make([]byte, scanBlock+len(p))
	hi := t.end
	for hi > 0 {
		lo := max(0, hi-scanBlock)
		b := buf[:min(t.end, hi+int64(len(p))-1)-lo]
		if _, err := t.f.ReadAt(b, lo); err != nil && err != io.EOF {
			return nil, 0, false, errors.Wrapf(err, "companion: reading transcript %s", t.path)
		}
		for i := bytes.LastIndex(b, p); i >= 0; i = bytes.LastIndex(b[:i], p) {
			line, next, err := t.line(lo + int64(i))
			if err != nil {
				return nil, 0, false, err
			}
			if ok(line) {
				return line, next, true, nil
			}
		}
		hi = lo
	}
	return nil, 0, false, nil
}
