package boltfile

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/cockroachdb/errors"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/strata-go/strata/backend/internal/placecrc"
)

// Every value stored is an envelope: the payload, then a 5-byte trailer,
//
//	CRC32C (Castagnoli), 4 bytes big-endian
//	envelope version (1), 1 byte
//
// The CRC covers the record's identity, then the payload: the session id
// (uvarint length, then the bytes; "" for meta), the table's code (one
// byte: a backend.Table, or codeMeta, codeState, codeEvent), the key
// (uvarint length, then the bytes), the payload. A flipped bit that renames
// a session's bucket, changes a seq or an id, or moves a record to another
// table reads as damage at that place, never as another record's data.
//
// The trailer goes after the payload so that a caller's buffer with spare
// capacity takes it without a copy (see backend.Tx).
const (
	trailerSize     = 5
	envelopeVersion = 1
)

// Table codes of the records that are not in a backend.Table. They are
// above every Table value.
const (
	codeMeta  byte = 0xF0
	codeState byte = 0xF1
	codeEvent byte = 0xF2
)

// identity is the CRC of a record's identity: its session's (placecrc.Session),
// its table's code and its key.
func identity(session uint32, code byte, key []byte) uint32 {
	return placecrc.Len(crc32.Update(session, placecrc.Table, []byte{code}), key)
}

// seal returns the envelope of payload v at identity id, appended to v:
// in v's own array when it has the room.
func seal(id uint32, v []byte) []byte {
	crc := crc32.Update(id, placecrc.Table, v)
	return append(v, byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc), envelopeVersion)
}

// unseal returns the payload of envelope raw stored at identity id: a
// slice of raw, capped so that an append copies (raw may be bbolt's map,
// which is read-only).
func unseal(id uint32, raw []byte) ([]byte, error) {
	if len(raw) < trailerSize {
		return nil, errors.Newf("value of %d bytes is shorter than the %d-byte envelope", len(raw), trailerSize)
	}
	n := len(raw) - trailerSize
	if v := raw[n+4]; v != envelopeVersion {
		return nil, errors.Newf("envelope version %d, not the %d strata writes: the value is damaged", v, envelopeVersion)
	}
	stored := binary.BigEndian.Uint32(raw[n:])
	if crc := crc32.Update(id, placecrc.Table, raw[:n]); crc != stored {
		return nil, errors.Newf("checksum mismatch: stored %08x, computed %08x (damaged value, or damaged key or session name)", stored, crc)
	}
	return raw[:n:n], nil
}

// The meta record, at key "version" of bucket "meta". It keeps this
// encoding — msgpack, with these field names, in this envelope — in every
// format to come, so that any strata can tell a file's format.
type metaRecord struct {
	Format    int    `msgpack:"f"`
	CreatedBy string `msgpack:"c,omitempty"`
	Created   int64  `msgpack:"t,omitempty"` // Unix ns
}

var (
	bucketMeta = []byte("meta")
	keyVersion = []byte("version")
	// keyFormatOld is where formats 1 to 5 kept their meta record.
	keyFormatOld = []byte("format")
)

// maxMetaBytes bounds the meta record a file may claim.
const maxMetaBytes = 4 << 10

var metaIdentity = identity(placecrc.Session(""), codeMeta, keyVersion)

func encodeMeta(r metaRecord) ([]byte, error) {
	b, err := msgpack.Marshal(&r)
	if err != nil {
		return nil, errors.Wrap(err, "boltfile: encoding the meta record")
	}
	return seal(metaIdentity, b), nil
}

func decodeMeta(raw []byte) (metaRecord, error) {
	var r metaRecord
	p, err := unseal(metaIdentity, raw)
	if err != nil {
		return r, err
	}
	if len(p) > maxMetaBytes {
		return r, errors.Newf("meta record of %d bytes", len(p))
	}
	if err := msgpack.Unmarshal(p, &r); err != nil {
		return r, errors.Wrap(err, "meta record")
	}
	return r, nil
}

// decodeOldMeta reads the format of a meta record of formats 1 to 5: a
// 10-byte envelope (version 1, record type 1, payload length u32, CRC32C
// u32 of the first 6 bytes and the payload) around msgpack with the
// format at "f".
func decodeOldMeta(raw []byte) (int, error) {
	const header = 10
	if len(raw) < header || len(raw) > header+maxMetaBytes {
		return 0, errors.Newf("old meta record of %d bytes", len(raw))
	}
	if raw[0] != 1 || raw[1] != 1 || int(binary.BigEndian.Uint32(raw[2:])) != len(raw)-header {
		return 0, errors.New("old meta record with a bad envelope")
	}
	crc := crc32.Update(crc32.Checksum(raw[:6], placecrc.Table), placecrc.Table, raw[header:])
	if crc != binary.BigEndian.Uint32(raw[6:]) {
		return 0, errors.New("old meta record: checksum mismatch")
	}
	var r metaRecord
	if err := msgpack.Unmarshal(raw[header:], &r); err != nil {
		return 0, errors.Wrap(err, "old meta record")
	}
	return r.Format, nil
}
