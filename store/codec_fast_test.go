package store

import (
	"bytes"
	"math"
	"math/rand"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/strata-go/strata/tier"
)

// eventRecPlain and stateRecPlain are the records without their methods:
// msgpack encodes and decodes them by reflection.
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

// TestFastCodec_SameBytes: the hand-written encoders write the bytes the
// reflection encoder writes, and each side decodes the other's, for records
// with every field empty, full, and at its limits.
func TestFastCodec_SameBytes(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 3000; i++ {
		ev := eventRec{V: int(randInt(rng) % 1000), Seq: randUint(rng), Turn: randUint(rng), Time: randInt(rng),
			Kind: tier.Kind(rng.Intn(256)), ID: randString(rng), Key: randString(rng), Name: randString(rng),
			Failed: rng.Intn(2) == 0, By: randString(rng), Text: randString(rng), Opener: randUint(rng)}
		fast, err := msgpack.Marshal(&ev)
		if err != nil {
			t.Fatal(err)
		}
		fastCompact := reflectEncodeFast(t, &ev)
		plain := eventRecPlain(ev)
		want := reflectEncode(t, &plain)
		if !bytes.Equal(fastCompact, want) || !bytes.Equal(fast, want) {
			t.Fatalf("event %d: the fast encoder writes %x, reflection %x", i, fastCompact[:min(len(fastCompact), 64)], want[:min(len(want), 64)])
		}
		var back eventRec
		if err := msgpack.Unmarshal(want, &back); err != nil || back != ev {
			t.Fatalf("event %d: fast decoding %+v, %v", i, back, err)
		}

		st := stateRec{V: int(randInt(rng) % 1000), Head: randUint(rng), Turn: randUint(rng), FrameVersion: randUint(rng),
			CompactedTo: randUint(rng), Roots: int(randInt(rng)), NextNode: randUint(rng), NextCk: randUint(rng), NextAudit: randUint(rng),
			RefusedTo: randUint(rng), RefusedTurn: randUint(rng), FoldRefusedTo: randUint(rng)}
		plainSt := stateRecPlain(st)
		if got, want := reflectEncodeFast(t, &st), reflectEncode(t, &plainSt); !bytes.Equal(got, want) {
			t.Fatalf("state %d: the fast encoder writes %x, reflection %x", i, got, want)
		}
		var backSt stateRec
		if err := msgpack.Unmarshal(reflectEncode(t, &plainSt), &backSt); err != nil || backSt != st {
			t.Fatalf("state %d: fast decoding %+v, %v", i, backSt, err)
		}
	}
}

// reflectEncodeFast encodes v (a record with its methods) through the
// encoder settings encode uses.
func reflectEncodeFast(t testing.TB, v any) []byte { return reflectEncode(t, v) }

// FuzzFastCodec: on any bytes that checkMsgpack lets through (as decode
// does), the fast decoders agree with reflection — the same record, or both
// an error — except that reflection also reads a record written as an
// array, which strata never writes.
func FuzzFastCodec(f *testing.F) {
	f.Add(reflectEncode(f, &eventRecPlain{V: 1, Seq: 2, Kind: 3, ID: "c1", Text: "hi", Failed: true}))
	f.Add(reflectEncode(f, &stateRecPlain{V: 1, Head: 9, Roots: 2}))
	f.Add([]byte{0xc0})
	f.Add([]byte{0x81, 0xa1, 'z', 0x92, 1, 2})
	f.Add([]byte{0x82, 0xa1, 'q', 0xff, 0xa1, 'k', 0xcc, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 0 && (msgpcode.IsFixedArray(b[0]) || b[0] == msgpcode.Array16 || b[0] == msgpcode.Array32) {
			return
		}
		if checkMsgpack(b) != nil {
			return // decode never hands msgpack these (its five-byte bombs among them)
		}
		var fe eventRec
		var pe eventRecPlain
		ferr, perr := msgpack.Unmarshal(b, &fe), msgpack.Unmarshal(b, &pe)
		if (ferr == nil) != (perr == nil) || (ferr == nil && fe != eventRec(pe)) {
			t.Fatalf("event %x: fast %+v %v, reflection %+v %v", b, fe, ferr, pe, perr)
		}
		var fs stateRec
		var ps stateRecPlain
		ferr, perr = msgpack.Unmarshal(b, &fs), msgpack.Unmarshal(b, &ps)
		if (ferr == nil) != (perr == nil) || (ferr == nil && fs != stateRec(ps)) {
			t.Fatalf("state %x: fast %+v %v, reflection %+v %v", b, fs, ferr, ps, perr)
		}
	})
}
