package store

import (
	"github.com/cockroachdb/errors"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/strata-go/strata/tier"
)

// Events and the state are encoded on every append and decoded on every
// read of the raw log: for them, msgpack's reflection is replaced by these
// methods, which write exactly the bytes it writes (a map of the fields
// that are not omitted, in field order, compact integers) and read what it
// reads (a map in any order, unknown keys skipped, nil as the zero record).
// TestFastCodec_* and FuzzFastCodec check both against the reflection
// codec.

var errFieldType = errors.New("msgpack: a field of the wrong type")

// EncodeMsgpack implements msgpack.CustomEncoder.
func (r *eventRec) EncodeMsgpack(e *msgpack.Encoder) error {
	n := 3 // v, q, k
	for _, set := range [...]bool{r.Turn != 0, r.Time != 0, r.ID != "", r.Key != "", r.Name != "", r.Failed, r.By != "", r.Text != "", r.Opener != 0} {
		if set {
			n++
		}
	}
	w := fieldWriter{e: e}
	w.mapLen(n)
	w.int("v", int64(r.V))
	w.uint("q", r.Seq)
	if r.Turn != 0 {
		w.uint("t", r.Turn)
	}
	if r.Time != 0 {
		w.int("m", r.Time)
	}
	w.uint("k", uint64(r.Kind))
	w.str("i", r.ID)
	w.str("y", r.Key)
	w.str("n", r.Name)
	if r.Failed {
		w.key("f")
		w.err = errors.CombineErrors(w.err, e.EncodeBool(true))
	}
	w.str("b", r.By)
	w.str("x", r.Text)
	if r.Opener != 0 {
		w.uint("o", r.Opener)
	}
	return w.err
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (r *eventRec) DecodeMsgpack(d *msgpack.Decoder) error {
	*r = eventRec{}
	return decodeFields(d, func(k string) (bool, error) {
		var err error
		switch k {
		case "v":
			var v int64
			v, err = d.DecodeInt64()
			r.V = int(v)
		case "q":
			r.Seq, err = d.DecodeUint64()
		case "t":
			r.Turn, err = d.DecodeUint64()
		case "m":
			r.Time, err = d.DecodeInt64()
		case "k":
			var v uint8
			v, err = d.DecodeUint8()
			r.Kind = tier.Kind(v)
		case "i":
			r.ID, err = d.DecodeString()
		case "y":
			r.Key, err = d.DecodeString()
		case "n":
			r.Name, err = d.DecodeString()
		case "f":
			r.Failed, err = d.DecodeBool()
		case "b":
			r.By, err = d.DecodeString()
		case "x":
			r.Text, err = d.DecodeString()
		case "o":
			r.Opener, err = d.DecodeUint64()
		default:
			return false, nil
		}
		return true, err
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (r *stateRec) EncodeMsgpack(e *msgpack.Encoder) error {
	type field struct {
		key string
		v   uint64
	}
	fields := [...]field{{"h", r.Head}, {"t", r.Turn}, {"f", r.FrameVersion}, {"c", r.CompactedTo}, {"r", uint64(r.Roots)},
		{"n", r.NextNode}, {"k", r.NextCk}, {"a", r.NextAudit}, {"x", r.RefusedTo}, {"y", r.RefusedTurn}, {"z", r.FoldRefusedTo}}
	n := 1
	for _, f := range fields {
		if f.v != 0 {
			n++
		}
	}
	w := fieldWriter{e: e}
	w.mapLen(n)
	w.int("v", int64(r.V))
	for _, f := range fields {
		switch {
		case f.v == 0:
		case f.key == "r":
			w.int("r", int64(r.Roots)) // an int, as reflection writes it
		default:
			w.uint(f.key, f.v)
		}
	}
	return w.err
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (r *stateRec) DecodeMsgpack(d *msgpack.Decoder) error {
	*r = stateRec{}
	return decodeFields(d, func(k string) (bool, error) {
		var p *uint64
		switch k {
		case "v", "r":
			v, err := d.DecodeInt64()
			if k == "v" {
				r.V = int(v)
			} else {
				r.Roots = int(v)
			}
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
		default:
			return false, nil
		}
		var err error
		*p, err = d.DecodeUint64()
		return true, err
	})
}

// fieldWriter writes the fields of a record, keeping the first error.
type fieldWriter struct {
	e   *msgpack.Encoder
	err error
}

func (w *fieldWriter) mapLen(n int) {
	if w.err == nil {
		w.err = w.e.EncodeMapLen(n)
	}
}

func (w *fieldWriter) key(k string) {
	if w.err == nil {
		w.err = w.e.EncodeString(k)
	}
}

func (w *fieldWriter) int(k string, v int64) {
	w.key(k)
	if w.err == nil {
		w.err = w.e.EncodeInt(v)
	}
}

func (w *fieldWriter) uint(k string, v uint64) {
	w.key(k)
	if w.err == nil {
		w.err = w.e.EncodeUint(v)
	}
}

// str writes a string field that is omitted when empty.
func (w *fieldWriter) str(k, v string) {
	if v == "" {
		return
	}
	w.key(k)
	if w.err == nil {
		w.err = w.e.EncodeString(v)
	}
}

// decodeFields reads a map of fields, handing each key to field, which
// decodes its value and reports whether it knew the key; unknown keys'
// values are skipped. A nil is the zero record.
func decodeFields(d *msgpack.Decoder, field func(k string) (bool, error)) error {
	c, err := d.PeekCode()
	if err != nil {
		return err
	}
	if c != msgpcode.Nil && !msgpcode.IsFixedMap(c) && c != msgpcode.Map16 && c != msgpcode.Map32 {
		return errors.Newf("msgpack: unexpected code=%x decoding a record", c)
	}
	n, err := d.DecodeMapLen()
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		k, err := d.DecodeString()
		if err != nil {
			return err
		}
		known, err := field(k)
		if err != nil {
			return errors.Wrapf(errors.CombineErrors(errFieldType, err), "field %q", k)
		}
		if !known {
			if err := d.Skip(); err != nil {
				return err
			}
		}
	}
	return nil
}
