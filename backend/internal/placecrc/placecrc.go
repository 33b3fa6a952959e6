// Package placecrc is the checksum the backends keep beside every value:
// a CRC32C (Castagnoli) that starts with the value's place — its session,
// its table and its key, each prefixed with its length — and goes on with
// the value, so that a value moved to another place reads as damage there,
// never as another record's data.
package placecrc

import (
	"encoding/binary"
	"hash/crc32"
)

// Table is the CRC32C (Castagnoli) table.
var Table = crc32.MakeTable(crc32.Castagnoli)

// Len continues crc with b, prefixed with its length (uvarint).
func Len(crc uint32, b []byte) uint32 {
	var n [binary.MaxVarintLen64]byte
	crc = crc32.Update(crc, Table, n[:binary.PutUvarint(n[:], uint64(len(b)))])
	return crc32.Update(crc, Table, b)
}

// Session is the CRC of a session's part of a place: its id, prefixed
// with its length.
func Session(id string) uint32 { return Len(0, []byte(id)) }
