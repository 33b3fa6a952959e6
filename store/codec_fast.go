package store

import (
	"encoding/binary"
	"math"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/tier"
)

// The records an append writes and every read of the raw log reads —
// events, the state, and the ledger entries (tier.Open, Disposition,
// Constraint, Artifact) — skip msgpack's reflection and its Encoder and
// Decoder: these methods append the bytes it writes straight to the
// record's buffer (a map of the fields that are not omitted, in field order,
// compact integers: what encode's pooled encoder writes) and read what it
// reads from the checked payload (a map in any order, unknown keys skipped,
// nil as the zero record; each field's value as Decoder.DecodeString,
// DecodeUint64, DecodeInt64 or DecodeBool accepts it). TestFastCodec_* and
// FuzzFastCodec check both sides against the reflection codec.

// fastRecord is a record with a hand-written codec.
type fastRecord interface {
	// msgpackSize is the number of bytes appendMsgpack appends, so that
	// the record is allocated once, at its size.
	msgpackSize() int
	appendMsgpack(b []byte) []byte
	// decodeMsgpack decodes a payload that checkMsgpack accepted.
	decodeMsgpack(b []byte) error
}

// The ledger entries as stored: tier's types, with the codec.
type (
	openRec       tier.Open
	dispRec       tier.Disposition
	constraintRec tier.Constraint
	artifactRec   tier.Artifact
)

// fastRecordOf returns v's hand-written codec, or nil for a record that
// msgpack encodes by reflection.
func fastRecordOf(v any) fastRecord {
	switch v := v.(type) {
	case *eventRec:
		return v
	case *stateRec:
		return v
	case *tier.Open:
		return (*openRec)(v)
	case *tier.Disposition:
		return (*dispRec)(v)
	case *tier.Constraint:
		return (*constraintRec)(v)
	case *tier.Artifact:
		return (*artifactRec)(v)
	}
	return nil
}

var errFieldType = errors.New("msgpack: a field of the wrong type")

// encodeEvent, encodeState, decodeState and decodeEventRec are encode and
// decode for the records every append writes and every read of the raw log
// reads, on their own types: passed as an any, the record would move to the
// heap.
func encodeEvent(r *eventRec) ([]byte, error) {
	if err := hookEncode(recEvent); err != nil {
		return nil, err
	}
	return seal(recEvent, r.appendMsgpack(newRecord(r.msgpackSize())))
}

func encodeState(r *stateRec) ([]byte, error) {
	if err := hookEncode(recState); err != nil {
		return nil, err
	}
	return seal(recState, r.appendMsgpack(newRecord(r.msgpackSize())))
}

func decodeEventRec(b []byte, r *eventRec) error {
	if err := checkMsgpack(b); err != nil {
		return err
	}
	if err := r.decodeMsgpack(b); err != nil {
		return errors.Wrap(err, "msgpack")
	}
	return nil
}

func decodeState(b []byte, r *stateRec) error {
	if err := checkMsgpack(b); err != nil {
		return err
	}
	if err := r.decodeMsgpack(b); err != nil {
		return errors.Wrap(err, "msgpack")
	}
	return nil
}

func (r *eventRec) msgpackSize() int {
	n := 1 + intFieldSize(int64(r.V)) + uintFieldSize(r.Seq) + uintFieldSize(uint64(r.Kind)) +
		strFieldSize(r.ID) + strFieldSize(r.Key) + strFieldSize(r.Name) + strFieldSize(r.By) + strFieldSize(r.Text)
	if r.Turn != 0 {
		n += uintFieldSize(r.Turn)
	}
	if r.Time != 0 {
		n += intFieldSize(r.Time)
	}
	if r.Failed {
		n += 3
	}
	if r.Opener != 0 {
		n += uintFieldSize(r.Opener)
	}
	if r.Prior != 0 {
		n += 1 + uintFieldSize(r.Prior) // a two-byte key
	}
	if r.Ref != "" {
		n += strFieldSize(r.Ref)
	}
	return n
}

func (r *eventRec) appendMsgpack(b []byte) []byte {
	n := 3 // v, q, k
	for _, set := range [...]bool{r.Turn != 0, r.Time != 0, r.ID != "", r.Key != "", r.Name != "", r.Failed, r.By != "", r.Text != "", r.Opener != 0, r.Prior != 0, r.Ref != ""} {
		if set {
			n++
		}
	}
	b = appendMapLen(b, n)
	b = appendIntField(b, "v", int64(r.V))
	b = appendUintField(b, "q", r.Seq)
	if r.Turn != 0 {
		b = appendUintField(b, "t", r.Turn)
	}
	if r.Time != 0 {
		b = appendIntField(b, "m", r.Time)
	}
	b = appendUintField(b, "k", uint64(r.Kind))
	b = appendStrField(b, "i", r.ID)
	b = appendStrField(b, "y", r.Key)
	b = appendStrField(b, "n", r.Name)
	if r.Failed {
		b = append(appendStr(b, "f"), 0xc3)
	}
	b = appendStrField(b, "b", r.By)
	b = appendStrField(b, "x", r.Text)
	if r.Opener != 0 {
		b = appendUintField(b, "o", r.Opener)
	}
	if r.Prior != 0 {
		b = appendUintField(b, "pf", r.Prior)
	}
	b = appendStrField(b, "r", r.Ref)
	return b
}

func (r *eventRec) decodeMsgpack(b []byte) error {
	*r = eventRec{}
	d := fieldReader{b: b}
	return d.fields(func(k []byte) (bool, error) {
		var err error
		switch string(k) {
		case "v":
			var v int64
			v, err = d.int()
			r.V = int(v)
		case "q":
			r.Seq, err = d.uint()
		case "t":
			r.Turn, err = d.uint()
		case "m":
			r.Time, err = d.int()
		case "k":
			var v uint64
			v, err = d.uint()
			r.Kind = tier.Kind(v)
		case "i":
			r.ID, err = d.str()
		case "y":
			r.Key, err = d.str()
		case "n":
			r.Name, err = d.str()
		case "f":
			r.Failed, err = d.bool()
		case "b":
			r.By, err = d.str()
		case "x":
			r.Text, err = d.str()
		case "o":
			r.Opener, err = d.uint()
		case "pf":
			r.Prior, err = d.uint()
		case "r":
			r.Ref, err = d.str()
		default:
			return false, nil
		}
		return true, err
	})
}

func (r *stateRec) msgpackSize() int {
	n := intFieldSize(int64(r.V))
	fields := 1
	if r.Roots != 0 {
		n += intFieldSize(int64(r.Roots))
		fields++
	}
	for _, v := range [...]uint64{r.Head, r.Turn, r.FrameVersion, r.CompactedTo, r.NextNode, r.NextCk, r.NextAudit, r.RefusedTo, r.RefusedTurn, r.FoldRefusedTo, r.Bytes} {
		if v != 0 {
			n += uintFieldSize(v)
			fields++
		}
	}
	if r.Parent != "" {
		n += strFieldSize(r.Parent)
		fields++
	}
	if r.ForkReason != "" {
		n += 1 + strFieldSize(r.ForkReason) // a two-byte key
		fields++
	}
	for _, v := range [...]uint64{r.FoldRefusedPrev, r.CompactedBytes, r.RefusedBytes, r.ForkAt, r.ForkMarker, r.ForkCheckpoint} {
		if v != 0 {
			n += 1 + uintFieldSize(v) // a two-byte key
			fields++
		}
	}
	if fields < 16 {
		return 1 + n // a fixmap
	}
	return 3 + n // a map 16
}

func (r *stateRec) appendMsgpack(b []byte) []byte {
	// The fields in the struct's order, as reflection writes them: a
	// string field is one whose s is set.
	type field struct {
		key string
		v   uint64
		s   *string
	}
	fields := [...]field{{"h", r.Head, nil}, {"t", r.Turn, nil}, {"f", r.FrameVersion, nil}, {"c", r.CompactedTo, nil}, {"r", uint64(r.Roots), nil},
		{"n", r.NextNode, nil}, {"k", r.NextCk, nil}, {"a", r.NextAudit, nil}, {"x", r.RefusedTo, nil}, {"y", r.RefusedTurn, nil}, {"z", r.FoldRefusedTo, nil},
		{"zp", r.FoldRefusedPrev, nil}, {"b", r.Bytes, nil}, {"cb", r.CompactedBytes, nil}, {"xb", r.RefusedBytes, nil},
		{"p", 0, &r.Parent}, {"pq", r.ForkAt, nil}, {"pm", r.ForkMarker, nil}, {"pk", r.ForkCheckpoint, nil}, {"pr", 0, &r.ForkReason}}
	n := 1
	for _, f := range fields {
		if f.v != 0 || f.s != nil && *f.s != "" {
			n++
		}
	}
	b = appendMapLen(b, n)
	b = appendIntField(b, "v", int64(r.V))
	for _, f := range fields {
		switch {
		case f.s != nil:
			b = appendStrField(b, f.key, *f.s)
		case f.v == 0:
		case f.key == "r":
			b = appendIntField(b, "r", int64(r.Roots)) // an int, as reflection writes it
		default:
			b = appendUintField(b, f.key, f.v)
		}
	}
	return b
}

func (r *stateRec) decodeMsgpack(b []byte) error {
	*r = stateRec{}
	d := fieldReader{b: b}
	return d.fields(func(k []byte) (bool, error) {
		var p *uint64
		switch string(k) {
		case "v":
			v, err := d.int()
			r.V = int(v)
			return true, err
		case "r":
			v, err := d.int()
			r.Roots = int(v)
			return true, err
		case "h":
			p = &r.Head
		case "t":
			p = &r.Turn
		case "f":
			p = &r.FrameVersion
		case "c":
			p = &r.CompactedTo
		case "n":
			p = &r.NextNode
		case "k":
			p = &r.NextCk
		case "a":
			p = &r.NextAudit
		case "x":
			p = &r.RefusedTo
		case "y":
			p = &r.RefusedTurn
		case "z":
			p = &r.FoldRefusedTo
		case "zp":
			p = &r.FoldRefusedPrev
		case "b":
			p = &r.Bytes
		case "cb":
			p = &r.CompactedBytes
		case "xb":
			p = &r.RefusedBytes
		case "p":
			v, err := d.str()
			r.Parent = v
			return true, err
		case "pq":
			p = &r.ForkAt
		case "pm":
			p = &r.ForkMarker
		case "pk":
			p = &r.ForkCheckpoint
		case "pr":
			v, err := d.str()
			r.ForkReason = v
			return true, err
		default:
			return false, nil
		}
		var err error
		*p, err = d.uint()
		return true, err
	})
}

func (r *openRec) msgpackSize() int {
	n := 1 + 2 + strSize(r.ID) + uintFieldSize(uint64(r.Kind)) + strFieldSize(r.Name)
	if r.Seq != 0 {
		n += uintFieldSize(r.Seq)
	}
	return n
}

func (r *openRec) appendMsgpack(b []byte) []byte {
	n := 2 // i, k
	if r.Name != "" {
		n++
	}
	if r.Seq != 0 {
		n++
	}
	b = appendMapLen(b, n)
	b = appendStr(appendStr(b, "i"), r.ID)
	b = appendUintField(b, "k", uint64(r.Kind))
	b = appendStrField(b, "n", r.Name)
	if r.Seq != 0 {
		b = appendUintField(b, "q", r.Seq)
	}
	return b
}

func (r *openRec) decodeMsgpack(b []byte) error {
	*r = openRec{}
	d := fieldReader{b: b}
	return d.fields(func(k []byte) (bool, error) {
		var err error
		switch string(k) {
		case "i":
			r.ID, err = d.str()
		case "k":
			var v uint64
			v, err = d.uint()
			r.Kind = tier.Kind(v)
		case "n":
			r.Name, err = d.str()
		case "q":
			r.Seq, err = d.uint()
		default:
			return false, nil
		}
		return true, err
	})
}

func (r *dispRec) msgpackSize() int {
	n := 1 + 2 + strSize(r.Key) + uintFieldSize(uint64(r.State)) + strFieldSize(r.Reason) + strFieldSize(r.By)
	if r.Seq != 0 {
		n += uintFieldSize(r.Seq)
	}
	if r.FailedAt != 0 {
		n += 1 + uintFieldSize(r.FailedAt) // a two-byte key
	}
	return n
}

func (r *dispRec) appendMsgpack(b []byte) []byte {
	n := 2 // y, s
	for _, set := range [...]bool{r.Reason != "", r.By != "", r.Seq != 0, r.FailedAt != 0} {
		if set {
			n++
		}
	}
	b = appendMapLen(b, n)
	b = appendStr(appendStr(b, "y"), r.Key)
	b = appendUintField(b, "s", uint64(r.State))
	b = appendStrField(b, "r", r.Reason)
	b = appendStrField(b, "b", r.By)
	if r.Seq != 0 {
		b = appendUintField(b, "q", r.Seq)
	}
	if r.FailedAt != 0 {
		b = appendUintField(b, "fa", r.FailedAt)
	}
	return b
}

func (r *dispRec) decodeMsgpack(b []byte) error {
	*r = dispRec{}
	d := fieldReader{b: b}
	return d.fields(func(k []byte) (bool, error) {
		var err error
		switch string(k) {
		case "y":
			r.Key, err = d.str()
		case "s":
			var v uint64
			v, err = d.uint()
			r.State = tier.Kind(v)
		case "r":
			r.Reason, err = d.str()
		case "b":
			r.By, err = d.str()
		case "q":
			r.Seq, err = d.uint()
		case "fa":
			r.FailedAt, err = d.uint()
		default:
			return false, nil
		}
		return true, err
	})
}

func (r *constraintRec) msgpackSize() int {
	n := 1 + 2 + strSize(r.Key) + strFieldSize(r.Text)
	if r.Withdrawn {
		n += 3
	}
	if r.Seq != 0 {
		n += uintFieldSize(r.Seq)
	}
	return n
}

func (r *constraintRec) appendMsgpack(b []byte) []byte {
	n := 1 // y
	for _, set := range [...]bool{r.Text != "", r.Withdrawn, r.Seq != 0} {
		if set {
			n++
		}
	}
	b = appendMapLen(b, n)
	b = appendStr(appendStr(b, "y"), r.Key)
	b = appendStrField(b, "x", r.Text)
	if r.Withdrawn {
		b = append(appendStr(b, "w"), 0xc3)
	}
	if r.Seq != 0 {
		b = appendUintField(b, "q", r.Seq)
	}
	return b
}

func (r *constraintRec) decodeMsgpack(b []byte) error {
	*r = constraintRec{}
	d := fieldReader{b: b}
	return d.fields(func(k []byte) (bool, error) {
		var err error
		switch string(k) {
		case "y":
			r.Key, err = d.str()
		case "x":
			r.Text, err = d.str()
		case "w":
			r.Withdrawn, err = d.bool()
		case "q":
			r.Seq, err = d.uint()
		default:
			return false, nil
		}
		return true, err
	})
}

func (r *artifactRec) msgpackSize() int {
	n := 1 + 2 + strSize(r.Key) + strFieldSize(r.Text)
	if r.Seq != 0 {
		n += uintFieldSize(r.Seq)
	}
	return n
}

func (r *artifactRec) appendMsgpack(b []byte) []byte {
	n := 1 // y
	if r.Text != "" {
		n++
	}
	if r.Seq != 0 {
		n++
	}
	b = appendMapLen(b, n)
	b = appendStr(appendStr(b, "y"), r.Key)
	b = appendStrField(b, "x", r.Text)
	if r.Seq != 0 {
		b = appendUintField(b, "q", r.Seq)
	}
	return b
}

func (r *artifactRec) decodeMsgpack(b []byte) error {
	*r = artifactRec{}
	d := fieldReader{b: b}
	return d.fields(func(k []byte) (bool, error) {
		var err error
		switch string(k) {
		case "y":
			r.Key, err = d.str()
		case "x":
			r.Text, err = d.str()
		case "q":
			r.Seq, err = d.uint()
		default:
			return false, nil
		}
		return true, err
	})
}

// The encoding side: msgpack's Encoder.EncodeMapLen, EncodeString,
// EncodeUint and EncodeInt, appending.

func appendMapLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xde), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdf), uint32(n))
}

func appendStr(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n < 256:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

// appendUintField appends key k and the unsigned integer v.
func appendUintField(b []byte, k string, v uint64) []byte {
	b = appendStr(b, k)
	switch {
	case v <= math.MaxInt8:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
}

// appendIntField appends key k and the signed integer v.
func appendIntField(b []byte, k string, v int64) []byte {
	if v >= 0 {
		return appendUintField(b, k, uint64(v))
	}
	b = appendStr(b, k)
	switch {
	case v >= -32:
		return append(b, byte(v))
	case v >= math.MinInt8:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}

// appendStrField appends key k and the string v, omitted when empty.
func appendStrField(b []byte, k, v string) []byte {
	if v == "" {
		return b
	}
	return appendStr(appendStr(b, k), v)
}

// The sizes of what the append functions append. Every record has fewer
// than 16 fields (a one-byte map header) and one-letter keys (two bytes).

func strSize(s string) int {
	switch n := len(s); {
	case n < 32:
		return 1 + n
	case n < 256:
		return 2 + n
	case n <= math.MaxUint16:
		return 3 + n
	}
	return 5 + len(s)
}

// strFieldSize is the size of a string field omitted when empty.
func strFieldSize(s string) int {
	if s == "" {
		return 0
	}
	return 2 + strSize(s)
}

func uintFieldSize(v uint64) int {
	switch {
	case v <= math.MaxInt8:
		return 2 + 1
	case v <= math.MaxUint8:
		return 2 + 2
	case v <= math.MaxUint16:
		return 2 + 3
	case v <= math.MaxUint32:
		return 2 + 5
	}
	return 2 + 9
}

func intFieldSize(v int64) int {
	switch {
	case v >= 0:
		return uintFieldSize(uint64(v))
	case v >= -32:
		return 2 + 1
	case v >= math.MinInt8:
		return 2 + 2
	case v >= math.MinInt16:
		return 2 + 3
	case v >= math.MinInt32:
		return 2 + 5
	}
	return 2 + 9
}

// fieldReader reads msgpack values from a payload, accepting for each Go
// type the codes msgpack's Decoder accepts.
type fieldReader struct {
	b []byte
	i int
}

var errTruncated = errors.New("msgpack: truncated")

func (d *fieldReader) code() (byte, error) {
	if d.i >= len(d.b) {
		return 0, errTruncated
	}
	c := d.b[d.i]
	d.i++
	return c, nil
}

func (d *fieldReader) next(n int) ([]byte, error) {
	if n > len(d.b)-d.i {
		return nil, errTruncated
	}
	p := d.b[d.i : d.i+n]
	d.i += n
	return p, nil
}

// number reads the n big-endian bytes after a code.
func (d *fieldReader) number(n int) (uint64, error) {
	p, err := d.next(n)
	var v uint64
	for _, c := range p {
		v = v<<8 | uint64(c)
	}
	return v, err
}

// uint is Decoder.DecodeUint64: nil is 0, a negative integer wraps.
func (d *fieldReader) uint() (uint64, error) { return d.integer("uint64") }

// int is Decoder.DecodeInt64: nil is 0.
func (d *fieldReader) int() (int64, error) {
	v, err := d.integer("int64")
	return int64(v), err
}

// integer reads any integer code as the bits of an int64 or a uint64,
// which are the same: msgpack's int and uint conversions agree on them.
func (d *fieldReader) integer(what string) (uint64, error) {
	c, err := d.code()
	if err != nil {
		return 0, err
	}
	switch {
	case c == 0xc0:
		return 0, nil
	case c <= 0x7f || c >= 0xe0: // fixnums
		return uint64(int8(c)), nil
	}
	var v uint64
	switch c {
	case 0xcc, 0xcd, 0xce, 0xcf: // uint8..uint64
		return d.number(1 << (c - 0xcc))
	case 0xd0:
		v, err = d.number(1)
		v = uint64(int8(v))
	case 0xd1:
		v, err = d.number(2)
		v = uint64(int16(v))
	case 0xd2:
		v, err = d.number(4)
		v = uint64(int32(v))
	case 0xd3:
		return d.number(8)
	default:
		return 0, errors.Newf("msgpack: invalid code=%x decoding %s", c, what)
	}
	return v, err
}

// bool is Decoder.DecodeBool: nil is false.
func (d *fieldReader) bool() (bool, error) {
	c, err := d.code()
	switch {
	case err != nil:
		return false, err
	case c == 0xc0, c == 0xc2:
		return false, nil
	case c == 0xc3:
		return true, nil
	}
	return false, errors.Newf("msgpack: invalid code=%x decoding bool", c)
}

// strBytes is Decoder.DecodeString's read, without the copy: nil is
// empty, and bin is read as str.
func (d *fieldReader) strBytes() ([]byte, error) {
	c, err := d.code()
	if err != nil {
		return nil, err
	}
	var n uint64
	switch {
	case c == 0xc0:
		return nil, nil
	case c >= 0xa0 && c <= 0xbf:
		n = uint64(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		n, err = d.number(1)
	case c == 0xda || c == 0xc5:
		n, err = d.number(2)
	case c == 0xdb || c == 0xc6:
		n, err = d.number(4)
	default:
		return nil, errors.Newf("msgpack: invalid code=%x decoding string/bytes length", c)
	}
	if err != nil {
		return nil, err
	}
	if n > uint64(len(d.b)-d.i) {
		return nil, errTruncated
	}
	return d.next(int(n))
}

func (d *fieldReader) str() (string, error) {
	p, err := d.strBytes()
	return string(p), err
}

// fields reads a map of fields, handing each key to field, which decodes
// its value from d and reports whether it knew the key; unknown keys'
// values are skipped. A nil is the zero record. (field reads through the
// d it captures: handing it d would move d to the heap.)
func (d *fieldReader) fields(field func(k []byte) (bool, error)) error {
	c, err := d.code()
	if err != nil {
		return err
	}
	var n uint64
	switch {
	case c == 0xc0:
		return nil
	case c >= 0x80 && c <= 0x8f:
		n = uint64(c & 0x0f)
	case c == 0xde:
		n, err = d.number(2)
	case c == 0xdf:
		n, err = d.number(4)
	default:
		return errors.Newf("msgpack: unexpected code=%x decoding a record", c)
	}
	if err != nil {
		return err
	}
	for ; n > 0; n-- {
		k, err := d.strBytes()
		if err != nil {
			return err
		}
		known, err := field(k)
		if err != nil {
			return errors.Wrapf(errors.CombineErrors(errFieldType, err), "field %q", k[:min(len(k), 256)])
		}
		if !known {
			if d.i, err = skipValue(d.b, d.i, 0); err != nil {
				return err
			}
		}
	}
	return nil
}
