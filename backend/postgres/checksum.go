package postgres

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend/internal/placecrc"
)

// Every row holds, beside its value, the CRC32C (Castagnoli) of the value's
// place and the value: the session id, the SQL table's name and the key,
// each prefixed with its length (uvarint), then the value. The key of an
// event is its seq, big-endian; the state's is empty. A value changed by
// an SQL UPDATE, or a row moved to another session, seq or key, reads as
// damage at that place — never as another record's data.

// placeCRC is the CRC of a place: a session's (placecrc.Session), a table's name
// and a key.
func placeCRC(session uint32, table string, key []byte) uint32 {
	return placecrc.Len(placecrc.Len(session, []byte(table)), key)
}

// checksum is the crc column of value v at place (placeCRC).
func checksum(place uint32, v []byte) int64 { return int64(crc32.Update(place, placecrc.Table, v)) }

// checkSum returns an error unless crc is the checksum of v at place.
func checkSum(place uint32, v []byte, crc int64) error {
	if want := checksum(place, v); crc != want {
		return errors.Newf("checksum mismatch: stored %08x, computed %08x (the value, or its session, table or key, was changed)", uint32(crc), uint32(want))
	}
	return nil
}

// seqKey is an event's key in its place: the seq, big-endian.
func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), seq) }
