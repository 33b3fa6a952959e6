package store

import (
	"bytes"
	"math"
	"math/rand"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/strata-go/strata/tier"
)

// eventRecPlain and stateRecPlain are the records as msgpack's reflection
// sees them (the store's records hold no msgpack methods: were one added,
// these would still be encoded by reflection).
type (
	eventRecPlain eventRec
	stateRecPlain stateRec
)

func reflectEncode(t testing.TB, v any) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true) // as encode's pooled encoders
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func randString(rng *rand.Rand) string {
	switch rng.Intn(4) {
	case 0:
		return ""
	case 1:
		return "k"
	case 2:
		return string(bytes.Repeat([]byte("é"), rng.Intn(200)))
	}
	return string(bytes.Repeat([]byte("x"), rng.Intn(70000)))
}

func randUint(rng *rand.Rand) uint64 {
	switch rng.Intn(6) {
	case 0:
		return 0
	case 1:
		return uint64(rng.Intn(128))
	case 2:
		return uint64(rng.Intn(1 << 16))
	case 3:
		return uint64(rng.Int63n(1 << 33))
	case 4:
		return math.MaxUint64
	}
	return rng.Uint64()
}

func randInt(rng *rand.Rand) int64 {
	switch rng.Intn(4) {
	case 0:
		return 0
	case 1:
		return -rng.Int63n(1 << uint(rng.Intn(63)))
	case 2:
		return math.MinInt64
	}
	return rng.Int63()
}

// randRecords returns one random record of each type with a hand-written
// codec, as pairs: the record, and a pointer to the same values in a type
// that msgpack encodes and decodes by reflection.
func randRecords(rng *rand.Rand) [][2]any {
	ev := eventRec{V: int(randInt(rng) % 1000), Seq: randUint(rng), Turn: randUint(rng), Time: randInt(rng),
		Kind: tier.Kind(rng.Intn(256)), ID: randString(rng), Key: randString(rng), Name: randString(rng),
		Failed: rng.Intn(2) == 0, By: randString(rng), Text: randString(rng), Opener: randUint(rng), Prior: randUint(rng), Ref: randString(rng)}
	st := stateRec{V: int(randInt(rng) % 1000), Head: randUint(rng), Turn: randUint(rng), FrameVersion: randUint(rng),
		CompactedTo: randUint(rng), Roots: int(randInt(rng)), NextNode: randUint(rng), NextCk: randUint(rng), NextAudit: randUint(rng),
		RefusedTo: randUint(rng), RefusedTurn: randUint(rng), FoldRefusedTo: randUint(rng), FoldRefusedPrev: randUint(rng),
		Bytes: randUint(rng), CompactedBytes: randUint(rng), RefusedBytes: randUint(rng),
		Parent: randString(rng), ForkAt: randUint(rng), ForkMarker: randUint(rng), ForkCheckpoint: randUint(rng), ForkReason: randString(rng)}
	o := tier.Open{ID: randString(rng), Kind: tier.Kind(rng.Intn(256)), Name: randString(rng), Seq: randUint(rng)}
	d := tier.Disposition{Key: randString(rng), State: tier.Kind(rng.Intn(256)), Reason: randString(rng), By: randString(rng), Seq: randUint(rng), FailedAt: randUint(rng)}
	c := tier.Constraint{Key: randString(rng), Text: randString(rng), Withdrawn: rng.Intn(2) == 0, Seq: randUint(rng)}
	a := tier.Artifact{Key: randString(rng), Text: randString(rng), Seq: randUint(rng)}
	pe, ps := eventRecPlain(ev), stateRecPlain(st)
	return [][2]any{{&ev, &pe}, {&st, &ps}, {&o, &o}, {&d, &d}, {&c, &c}, {&a, &a}}
}

// TestFastCodec_SameBytes: the hand-written encoders write the bytes the
// reflection encoder writes, of the size they announce, and the
// hand-written decoders read them back, for records with every field empty,
// full, and at its limits.
func TestFastCodec_SameBytes(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 3000; i++ {
		for _, pair := range randRecords(rng) {
			rec, plain := pair[0], pair[1]
			f := fastRecordOf(rec)
			if f == nil {
				t.Fatalf("%T has no fast codec", rec)
			}
			got, want := f.appendMsgpack(nil), reflectEncode(t, plain)
			if !bytes.Equal(got, want) {
				t.Fatalf("%T %d: the fast encoder writes %x, reflection %x", rec, i, got[:min(len(got), 64)], want[:min(len(want), 64)])
			}
			if len(got) != f.msgpackSize() {
				t.Fatalf("%T %d: %d bytes, %d announced", rec, i, len(got), f.msgpackSize())
			}
			back := reflect.New(reflect.TypeOf(rec).Elem()).Interface()
			if err := fastRecordOf(back).decodeMsgpack(want); err != nil || !reflect.DeepEqual(back, rec) {
				t.Fatalf("%T %d: fast decoding %+v, %v", rec, i, back, err)
			}
		}
	}
}

// TestFastCodec_EncodeDecode: encode and decode (and the typed forms the
// append path calls) take the fast path for these records, and write the
// reflection codec's bytes.
func TestFastCodec_EncodeDecode(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	types := []recType{recEvent, recState, recOpen, recDisp, recConstraint, recArtifact}
	for i := 0; i < 200; i++ {
		for j, pair := range randRecords(rng) {
			got, err := encode(types[j], pair[0])
			if err != nil {
				t.Fatal(err)
			}
			if want := reflectEncode(t, pair[1]); !bytes.Equal(got, want) {
				t.Fatalf("%T %d: encode writes %x, want %x", pair[0], i, got[:min(len(got), 64)], want[:min(len(want), 64)])
			}
			back := reflect.New(reflect.TypeOf(pair[0]).Elem()).Interface()
			if err := decode(types[j], got, back); err != nil || !reflect.DeepEqual(back, pair[0]) {
				t.Fatalf("%T %d: decode gives %+v, %v", pair[0], i, back, err)
			}
			// The typed forms of the append path write and read the same.
			var typed []byte
			switch r := pair[0].(type) {
			case *eventRec:
				typed, err = encodeEvent(r)
				var back eventRec
				if err := decodeEventRec(got, &back); err != nil || back != *r {
					t.Fatalf("event %d: decodeEventRec gives %+v, %v", i, back, err)
				}
			case *stateRec:
				typed, err = encodeState(r)
				var back stateRec
				if err := decodeState(got, &back); err != nil || back != *r {
					t.Fatalf("state %d: decodeState gives %+v, %v", i, back, err)
				}
			default:
				continue
			}
			if err != nil || !bytes.Equal(typed, got) {
				t.Fatalf("%T %d: the typed encoder writes %x, %v", pair[0], i, typed[:min(len(typed), 64)], err)
			}
		}
	}
}

// FuzzFastCodec: on any bytes that checkMsgpack lets through (as decode
// does), the fast decoders agree with reflection — the same record, or both
// an error — except that reflection also reads a record written as an
// array, which strata never writes.
func FuzzFastCodec(f *testing.F) {
	f.Add(reflectEncode(f, &eventRecPlain{V: 1, Seq: 2, Kind: 3, ID: "c1", Text: "hi", Failed: true}))
	f.Add(reflectEncode(f, &stateRecPlain{V: 1, Head: 9, Roots: 2}))
	f.Add(reflectEncode(f, &tier.Open{ID: "c1", Kind: tier.KindToolCall, Name: "bash", Seq: 7}))
	f.Add(reflectEncode(f, &tier.Disposition{Key: "a/1", State: tier.KindFailed, Reason: "why", By: "me", Seq: 300}))
	f.Add(reflectEncode(f, &tier.Constraint{Key: "c", Text: "no", Withdrawn: true, Seq: 1 << 40}))
	f.Add(reflectEncode(f, &tier.Artifact{Key: "f.go", Text: "x", Seq: 1}))
	f.Add([]byte{0xc0})
	f.Add([]byte{0x81, 0xa1, 'z', 0x92, 1, 2})
	f.Add([]byte{0x82, 0xa1, 'q', 0xff, 0xa1, 'k', 0xcc, 0xff})
	f.Add([]byte{0x82, 0xc4, 1, 'y', 0xc0, 0xa1, 's', 0xd0, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 0 && (msgpcode.IsFixedArray(b[0]) || b[0] == msgpcode.Array16 || b[0] == msgpcode.Array32) {
			return
		}
		if checkMsgpack(b) != nil {
			return // decode never hands msgpack these (its five-byte bombs among them)
		}
		fast := []any{&eventRec{}, &stateRec{}, &tier.Open{}, &tier.Disposition{}, &tier.Constraint{}, &tier.Artifact{}}
		plain := []any{&eventRecPlain{}, &stateRecPlain{}, &tier.Open{}, &tier.Disposition{}, &tier.Constraint{}, &tier.Artifact{}}
		for i := range fast {
			ferr, perr := fastRecordOf(fast[i]).decodeMsgpack(b), msgpack.Unmarshal(b, plain[i])
			same := reflect.ValueOf(fast[i]).Elem().Convert(reflect.TypeOf(plain[i]).Elem()).Interface() ==
				reflect.ValueOf(plain[i]).Elem().Interface()
			if (ferr == nil) != (perr == nil) || (ferr == nil && !same) {
				t.Fatalf("%T %x: fast %+v %v, reflection %+v %v", fast[i], b, fast[i], ferr, plain[i], perr)
			}
		}
	})
}
