package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/cockroachdb/errors"
	"github.com/vmihailenco/msgpack/v5"
)

// Every stored value is an envelope:
//
//	[0]     envelope version (1)
//	[1]     record type (recXxx below), so a value of the wrong type is caught
//	[2:6]   payload length, big-endian uint32
//	[6:10]  CRC32C (Castagnoli) of bytes [0:6] and the payload
//	[10:]   payload: msgpack of a concrete record struct
//
// bbolt checksums only its meta pages; the envelope is what catches damage to
// data pages. The payload is checked structurally (every declared length fits
// in the bytes present, nesting bounded) before msgpack decodes it: msgpack
// v5.4.1 allocates what a declared length says, so five bytes could ask for
// gigabytes.
const (
	envelopeVersion = 1
	envelopeHeader  = 10
	// maxRecordBytes caps any stored value; larger envelopes are damage.
	maxRecordBytes = 64 << 20
	maxNesting     = 16
)

type recType uint8

// Record types. Stored on disk: never renumber.
const (
	recMeta       recType = 1
	recState      recType = 2
	recEvent      recType = 3
	recNode       recType = 4
	recMarker     recType = 5
	recCheckpoint recType = 6
	recAudit      recType = 7
	recOpen       recType = 8
	recDisp       recType = 9
	recConstraint recType = 10
	recArtifact   recType = 11
	recRoot       recType = 12
	recIndex      recType = 13
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

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

// encode returns the envelope of v, a pointer to a record struct. The
// returned slice is freshly allocated (bbolt keeps it until commit).
func encode(t recType, v any) ([]byte, error) {
	if err := hookEncode(t); err != nil {
		return nil, err
	}
	if f := fastRecordOf(v); f != nil {
		return seal(t, f.appendMsgpack(newEnvelope(f.msgpackSize())))
	}
	pe := encPool.Get().(*pooledEncoder)
	defer encPool.Put(pe)
	pe.buf.Reset()
	pe.buf.Write(make([]byte, envelopeHeader))
	if err := pe.enc.Encode(v); err != nil {
		return nil, errors.Wrapf(err, "store: encoding record type %d", t)
	}
	return seal(t, bytes.Clone(pe.buf.Bytes()))
}

// newEnvelope returns an envelope's header, still blank, with room for the
// n bytes of payload the caller appends.
func newEnvelope(n int) []byte { return make([]byte, envelopeHeader, envelopeHeader+n) }

// seal fills in the header of envelope b of type t, its payload appended.
func seal(t recType, b []byte) ([]byte, error) {
	n := len(b) - envelopeHeader
	if n > maxRecordBytes {
		return nil, errors.Newf("store: record of %d bytes is over the %d-byte limit", n, maxRecordBytes)
	}
	b[0] = envelopeVersion
	b[1] = byte(t)
	binary.BigEndian.PutUint32(b[2:6], uint32(n))
	crc := crc32.Update(crc32.Checksum(b[:6], castagnoli), castagnoli, b[envelopeHeader:])
	binary.BigEndian.PutUint32(b[6:10], crc)
	return b, nil
}

// decode checks the envelope of b and decodes its payload into v, which must
// be a pointer to the record struct of type t. Errors describe the damage;
// callers wrap them in a CorruptError naming where.
func decode(t recType, b []byte, v any) error {
	payload, err := checkedPayload(t, b)
	if err != nil {
		return err
	}
	if err := unmarshal(payload, v); err != nil {
		return errors.Wrap(err, "msgpack")
	}
	return nil
}

// checkedPayload returns the payload of envelope b of type t, once it is
// checked: the envelope, and the payload's msgpack structure.
func checkedPayload(t recType, b []byte) ([]byte, error) {
	payload, err := openEnvelope(t, b)
	if err != nil {
		return nil, err
	}
	if err := checkMsgpack(payload); err != nil {
		return nil, err
	}
	return payload, nil
}

// unmarshal decodes a checked payload into v, by the record's own codec
// where it has one (codec_fast.go).
func unmarshal(payload []byte, v any) error {
	if f := fastRecordOf(v); f != nil {
		return f.decodeMsgpack(payload)
	}
	return msgpack.Unmarshal(payload, v)
}

func openEnvelope(t recType, b []byte) ([]byte, error) {
	if len(b) < envelopeHeader {
		return nil, errors.Newf("value of %d bytes is shorter than an envelope", len(b))
	}
	if b[0] != envelopeVersion {
		return nil, errors.Newf("unknown envelope version %d", b[0])
	}
	if recType(b[1]) != t {
		return nil, errors.Newf("record type %d where %d was expected", b[1], t)
	}
	n := binary.BigEndian.Uint32(b[2:6])
	if n > maxRecordBytes || int(n) != len(b)-envelopeHeader {
		return nil, errors.Newf("envelope length %d, value holds %d", n, len(b)-envelopeHeader)
	}
	crc := crc32.Update(crc32.Checksum(b[:6], castagnoli), castagnoli, b[envelopeHeader:])
	if got := binary.BigEndian.Uint32(b[6:10]); got != crc {
		return nil, errors.Newf("checksum mismatch: stored %08x, computed %08x", got, crc)
	}
	return b[envelopeHeader:], nil
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

// u64u64 encodes a composite key of two big-endian uint64s.
func u64u64(a, b uint64) []byte {
	k := make([]byte, 16)
	binary.BigEndian.PutUint64(k, a)
	binary.BigEndian.PutUint64(k[8:], b)
	return k
}

func parseU64(k []byte) (uint64, error) {
	if len(k) != 8 {
		return 0, fmt.Errorf("key of %d bytes, want 8", len(k))
	}
	return binary.BigEndian.Uint64(k), nil
}
