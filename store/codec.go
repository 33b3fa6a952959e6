package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/cockroachdb/errors"
	"github.com/vmihailenco/msgpack/v5"
)

// Every record is msgpack of a concrete record struct; the backend keeps
// it with its own integrity check (boltfile: a CRC32C over the record's
// place and bytes). The payload is checked structurally (every declared
// length fits in the bytes present, nesting bounded) before msgpack decodes
// it: msgpack v5.4.1 allocates what a declared length says, so five bytes
// could ask for gigabytes.
const (
	// maxRecordBytes caps any stored value; larger ones are damage.
	maxRecordBytes = 64 << 20
	maxNesting     = 16
	// spareBytes is the room left after a record encoded here, so that a
	// backend can append its trailer without copying it.
	spareBytes = 8
)

type recType uint8

// Record types: which struct a record decodes into, for errors and the
// test hooks. The backend's place says which record a value is; the type is
// not stored.
const (
	recState recType = iota + 1
	recEvent
	recNode
	recMarker
	recCheckpoint
	recAudit
	recOpen
	recDisp
	recConstraint
	recArtifact
	recRoot
	recIndex
	recRef
)

var encPool = sync.Pool{New: func() any {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	return &pooledEncoder{buf: &buf, enc: enc}
}}

type pooledEncoder struct {
	buf *bytes.Buffer
	enc *msgpack.Encoder
}

// encode returns the msgpack of v, a pointer to a record struct of type
// t. The returned slice is freshly allocated (the backend may keep it until
// commit), with spareBytes of capacity after it.
func encode(t recType, v any) ([]byte, error) {
	if err := hookEncode(t); err != nil {
		return nil, err
	}
	if f := fastRecordOf(v); f != nil {
		return seal(t, f.appendMsgpack(newRecord(f.msgpackSize())))
	}
	pe := encPool.Get().(*pooledEncoder)
	defer encPool.Put(pe)
	pe.buf.Reset()
	if err := pe.enc.Encode(v); err != nil {
		return nil, errors.Wrapf(err, "store: encoding record type %d", t)
	}
	b := make([]byte, pe.buf.Len(), pe.buf.Len()+spareBytes)
	copy(b, pe.buf.Bytes())
	return seal(t, b)
}

// newRecord returns an empty buffer for a record of n bytes, with room to
// spare.
func newRecord(n int) []byte { return make([]byte, 0, n+spareBytes) }

// seal checks the size of record b of type t.
func seal(t recType, b []byte) ([]byte, error) {
	if len(b) > maxRecordBytes {
		return nil, errors.Newf("store: record of type %d, %d bytes, is over the %d-byte limit", t, len(b), maxRecordBytes)
	}
	return b, nil
}

// decode checks record b and decodes it into v, which must be a pointer to
// the record struct of type t. Errors describe the damage; callers wrap
// them in a CorruptError naming where.
func decode(t recType, b []byte, v any) error {
	if len(b) > maxRecordBytes {
		return errors.Newf("record of %d bytes is over the %d-byte limit", len(b), maxRecordBytes)
	}
	if err := checkMsgpack(b); err != nil {
		return err
	}
	if err := unmarshal(b, v); err != nil {
		return errors.Wrap(err, "msgpack")
	}
	return nil
}

// unmarshal decodes a checked record into v, by the record's own codec
// where it has one (codec_fast.go).
func unmarshal(payload []byte, v any) error {
	if f := fastRecordOf(v); f != nil {
		return f.decodeMsgpack(payload)
	}
	return msgpack.Unmarshal(payload, v)
}

// checkMsgpack walks one msgpack value and checks that it is well formed:
// every declared length fits in the bytes that remain, nesting is bounded,
// and nothing trails it.
func checkMsgpack(b []byte) error {
	n, err := skipValue(b, 0, 0)
	if err != nil {
		return err
	}
	if n != len(b) {
		return errors.Newf("msgpack: %d trailing bytes", len(b)-n)
	}
	return nil
}

func skipValue(b []byte, i, depth int) (int, error) {
	if depth > maxNesting {
		return 0, errors.Newf("msgpack: nesting deeper than %d", maxNesting)
	}
	if i >= len(b) {
		return 0, errors.New("msgpack: truncated")
	}
	c := b[i]
	i++
	need := func(n uint64) (int, error) {
		if n > uint64(len(b)-i) {
			return 0, errors.Newf("msgpack: length %d at offset %d exceeds the %d bytes left", n, i, len(b)-i)
		}
		return i + int(n), nil
	}
	length := func(size int) (uint64, error) {
		if size > len(b)-i {
			return 0, errors.New("msgpack: truncated length")
		}
		var n uint64
		for k := 0; k < size; k++ {
			n = n<<8 | uint64(b[i+k])
		}
		i += size
		return n, nil
	}
	var items uint64 // values to skip after the header (arrays, maps)
	switch {
	case c <= 0x7f || c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
		return i, nil
	case c >= 0x80 && c <= 0x8f:
		items = 2 * uint64(c&0x0f)
	case c >= 0x90 && c <= 0x9f:
		items = uint64(c & 0x0f)
	case c >= 0xa0 && c <= 0xbf:
		return need(uint64(c & 0x1f))
	default:
		switch c {
		case 0xcc, 0xd0:
			return need(1)
		case 0xcd, 0xd1:
			return need(2)
		case 0xca, 0xce, 0xd2:
			return need(4)
		case 0xcb, 0xcf, 0xd3:
			return need(8)
		case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
			return need(1 + 1<<(c-0xd4))
		case 0xc4, 0xd9, 0xc5, 0xda, 0xc6, 0xdb, 0xc7, 0xc8, 0xc9:
			size := lengthSize(c)
			n, err := length(size)
			if err != nil {
				return 0, err
			}
			if c >= 0xc7 && c <= 0xc9 {
				n++ // the ext type byte
			}
			return need(n)
		case 0xdc, 0xdd:
			n, err := length(lengthSize(c))
			if err != nil {
				return 0, err
			}
			items = n
		case 0xde, 0xdf:
			n, err := length(lengthSize(c))
			if err != nil {
				return 0, err
			}
			items = 2 * n
		default:
			return 0, errors.Newf("msgpack: invalid code 0x%02x at offset %d", c, i-1)
		}
	}
	// Each item takes at least one byte: refuse counts the bytes cannot hold
	// before walking them.
	if items > uint64(len(b)-i) {
		return 0, errors.Newf("msgpack: %d items declared at offset %d, %d bytes left", items, i, len(b)-i)
	}
	var err error
	for k := uint64(0); k < items; k++ {
		if i, err = skipValue(b, i, depth+1); err != nil {
			return 0, err
		}
	}
	return i, nil
}

// lengthSize returns how many bytes hold the length that follows code c
// (bin, str, ext, array and map codes).
func lengthSize(c byte) int {
	switch c {
	case 0xc4, 0xd9, 0xc7:
		return 1
	case 0xc5, 0xda, 0xc8, 0xdc, 0xde:
		return 2
	}
	return 4 // 0xc6, 0xdb, 0xc9, 0xdd, 0xdf
}

// u64 encodes a big-endian uint64 key, so that bbolt's byte order is
// numeric order.
func u64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

func parseU64(k []byte) (uint64, error) {
	if len(k) != 8 {
		return 0, fmt.Errorf("key of %d bytes, want 8", len(k))
	}
	return binary.BigEndian.Uint64(k), nil
}
