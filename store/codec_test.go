package store

// Internal tests of the record codec: they reach checkMsgpack, encode and
// decode, which the external tests cannot.

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/tier"
)

// hugeArray is the five-byte msgpack value that declares an array of 2³²−1
// elements (msgpack v5.4.1 issue #376: it allocates what the length says).
var hugeArray = []byte{0xdd, 0xff, 0xff, 0xff, 0xff}

func TestCheckMsgpack_Refuses(t *testing.T) {
	nest := func(n int, open byte) []byte { return append(bytes.Repeat([]byte{open}, n), 0xc0) }
	cases := map[string][]byte{
		"empty":                     {},
		"array32 of 2^32-1":         hugeArray,
		"array32 of 2^32-1, padded": append(bytes.Clone(hugeArray), bytes.Repeat([]byte{0xc0}, 100)...),
		"array16 of 65535":          {0xdc, 0xff, 0xff, 0xc0},
		"fixarray of 15, 1 present": {0x9f, 0xc0},
		"map32 of 2^32-1":           {0xdf, 0xff, 0xff, 0xff, 0xff},
		"map32 of 2^31 pairs":       {0xdf, 0x80, 0x00, 0x00, 0x00, 0xc0, 0xc0},
		"map16 of 65535":            {0xde, 0xff, 0xff, 0xa1, 'k', 0xc0},
		"fixmap of 1, key only":     {0x81, 0xa1, 'k'},
		"str32 of 2^32-1":           {0xdb, 0xff, 0xff, 0xff, 0xff, 'a'},
		"str16 of 65535":            {0xda, 0xff, 0xff, 'a', 'b'},
		"str8 of 255":               {0xd9, 0xff, 'a'},
		"fixstr of 31, 2 present":   {0xbf, 'a', 'b'},
		"bin32 of 2^32-1":           {0xc6, 0xff, 0xff, 0xff, 0xff},
		"bin8 truncated length":     {0xc4},
		"ext32 of 2^32-1":           {0xc9, 0xff, 0xff, 0xff, 0xff, 0x01},
		"ext8 missing type":         {0xc7, 0x00},
		"fixext16 short":            {0xd8, 0x01, 0x00},
		"uint64 short":              {0xcf, 0x00, 0x00},
		"float64 short":             {0xcb, 0x00},
		"array32 truncated length":  {0xdd, 0xff},
		"map16 truncated length":    {0xde},
		"invalid code 0xc1":         {0xc1},
		"trailing bytes":            {0xc0, 0xc0},
		"trailing after map":        {0x80, 0x01},
		"arrays nested 17 deep":     nest(17, 0x91),
		"maps nested deep":          append(bytes.Repeat([]byte{0x81, 0xa1, 'k'}, 40), 0xc0),
		"arrays nested 100000 deep": nest(100000, 0x91),
	}
	for name, b := range cases {
		if err := checkMsgpack(b); err == nil {
			t.Errorf("%s: checkMsgpack(% x) accepted", name, b[:min(len(b), 16)])
		}
	}
	ok := map[string][]byte{
		"nil":                    {0xc0},
		"fixint":                 {0x05},
		"negative fixint":        {0xff},
		"empty array32":          {0xdd, 0, 0, 0, 0},
		"empty map":              {0x80},
		"str8":                   {0xd9, 0x02, 'a', 'b'},
		"fixext1":                {0xd4, 0x01, 0x00},
		"ext8 of 2":              {0xc7, 0x02, 0x05, 'a', 'b'},
		"arrays nested 16 deep":  nest(16, 0x91),
		"map of array of nils":   {0x81, 0xa1, 'k', 0x93, 0xc0, 0xc0, 0xc0},
		"float32, int16, uint32": {0x93, 0xca, 0, 0, 0, 0, 0xd1, 0, 0, 0xce, 0, 0, 0, 0},
	}
	for name, b := range ok {
		if err := checkMsgpack(b); err != nil {
			t.Errorf("%s: checkMsgpack(% x) = %v", name, b, err)
		}
	}
}

// TestDecode_HugeDeclaredLength checks that a record declaring a huge
// array or map is refused before msgpack allocates it.
func TestDecode_HugeDeclaredLength(t *testing.T) {
	payloads := [][]byte{
		hugeArray,
		{0xdf, 0xff, 0xff, 0xff, 0xff},
		{0xdb, 0xff, 0xff, 0xff, 0xff},
		{0xc6, 0xff, 0xff, 0xff, 0xff},
		// A map whose value for "l" (claims) declares a huge array.
		{0x81, 0xa1, 'l', 0x81, 0xa1, 'r', 0xdd, 0xff, 0xff, 0xff, 0xff},
	}
	for _, p := range payloads {
		for _, rt := range []recType{recEvent, recState, recNode, recCheckpoint, recAudit} {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := decode(rt, p, emptyRecord(rt))
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Errorf("decode(% x) into type %d accepted", p, rt)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
				t.Errorf("decode(% x) into type %d allocated %d bytes", p, rt, grew)
			}
		}
	}
}

// emptyRecord returns a pointer to a fresh record struct of type t.
func emptyRecord(t recType) any {
	switch t {
	case recState:
		return &stateRec{}
	case recEvent:
		return &eventRec{}
	case recNode:
		return &nodeRec{}
	case recMarker:
		return &markerRec{}
	case recCheckpoint:
		return &checkpointRec{}
	case recAudit:
		return &auditRec{}
	case recOpen:
		return &tier.Open{}
	case recDisp:
		return &tier.Disposition{}
	case recConstraint:
		return &tier.Constraint{}
	case recArtifact:
		return &tier.Artifact{}
	case recRoot:
		return &rootRec{}
	case recIndex:
		return &indexRec{}
	case recRef:
		return &refRec{}
	}
	panic("unknown record type")
}

// sampleRecords returns one realistic record of every type.
func sampleRecords() map[recType]any {
	claims := tier.Claims{
		Resolved:     []tier.Resolution{{ID: "c0", Kind: tier.KindToolCall, Name: "bash", Seq: 2, At: 15}},
		Unresolved:   []tier.Open{{ID: "c3", Kind: tier.KindToolCall, Name: "bash", Seq: 18}},
		Failures:     []tier.Resolution{{ID: "c1", Kind: tier.KindToolCall, Seq: 4, At: 5, Failed: true, Reason: "dry run failed"}},
		Dispositions: []tier.Disposition{{Key: "approach/a", State: tier.KindRejected, Reason: "no", Seq: 9}},
		Constraints:  []tier.Constraint{{Key: "reversible", Text: "must be", Seq: 3}, {Key: "gone", Withdrawn: true}},
		Artifacts:    []tier.Artifact{{Key: "down.sql", Text: "rollback", Seq: 13}},
	}
	return map[recType]any{
		recState: &stateRec{V: 1, Head: 21, Turn: 9, FrameVersion: 2, CompactedTo: 13, Roots: 2, NextNode: 3, NextCk: 4, NextAudit: 1, RefusedTo: 17, RefusedTurn: 8},
		recEvent: &eventRec{V: 1, Seq: 5, Turn: 1, Time: 1740830400000000000, Kind: tier.KindToolResult, ID: "c1", Key: "approach/a",
			Failed: true, Text: "dry run failed: lock timeout ✓", Opener: 4, Ref: "toolu_01"},
		recNode: &nodeRec{V: 1, ID: 3, Depth: 2, From: 1, To: 13, Children: []uint64{1, 2}, Narrative: "the migration so far",
			Claims: claims, FrameVersion: 2, Summarizer: "extractive", Tokens: 120, Budget: 400, SpanHash: bytes.Repeat([]byte{0xab}, 32)},
		recMarker:     &markerRec{V: 1, ID: 3, Node: 3, Depth: 2, FrameVersion: 2, Boundary: 13, Status: marker.StatusValid},
		recCheckpoint: &checkpointRec{V: 1, ID: 4, Seq: 13, Prefix: []uint64{3}, FrameVersion: 2, Why: "marker", Status: 1},
		recAudit: &auditRec{V: 1, Refusal: Refusal{ID: 1, Depth: 1, From: 14, To: 17, FrameVersion: 2, Summarizer: "lossy", Attempt: 1, Checkpoint: 3,
			Failures: []marker.Failure{{Class: marker.Classes[0], Item: "c3", Detail: "open at the boundary"}}}},
		recOpen:       &tier.Open{ID: "c3", Kind: tier.KindToolCall, Name: "bash", Seq: 18},
		recDisp:       &tier.Disposition{Key: "approach/b", State: tier.KindSuperseded, Reason: "replaced", By: "approach/c", Seq: 11},
		recConstraint: &tier.Constraint{Key: "reversible", Text: "must be reversible", Seq: 3},
		recArtifact:   &tier.Artifact{Key: "migrations/003_down.sql", Text: "rollback", Seq: 13},
		recRoot:       &rootRec{V: 1, From: 1, Node: 3, To: 13, Depth: 2},
		recIndex:      &indexRec{V: 1, ID: 4},
		recRef:        &refRec{V: 1, First: 5, Last: 7},
	}
}

func TestEncodeDecode_RoundTrip(t *testing.T) {
	recs := sampleRecords()
	if want := int(recRef - recState + 1); len(recs) != want {
		t.Fatalf("%d sample records, want one per type (%d)", len(recs), want)
	}
	for rt, v := range recs {
		b, err := encode(rt, v)
		if err != nil {
			t.Fatalf("type %d: %v", rt, err)
		}
		// A record is its msgpack alone: the backend keeps its check.
		if err := checkMsgpack(b); err != nil {
			t.Errorf("type %d: encoded % x: %v", rt, b[:min(len(b), 16)], err)
		}
		if spare := cap(b) - len(b); spare < spareBytes {
			t.Errorf("type %d: %d bytes of spare capacity, want %d for the backend's trailer", rt, spare, spareBytes)
		}
		back := emptyRecord(rt)
		if err := decode(rt, b, back); err != nil {
			t.Fatalf("type %d: decode: %v", rt, err)
		}
		if !reflect.DeepEqual(back, v) {
			t.Errorf("type %d:\n got %+v\nwant %+v", rt, back, v)
		}
		// Same record, same bytes.
		if b2, _ := encode(rt, back); !bytes.Equal(b, b2) {
			t.Errorf("type %d: re-encoding differs", rt)
		}
	}
	// The pooled encoder is reset between records and ints are compact.
	small, _ := encode(recIndex, &indexRec{V: 1, ID: 1})
	if len(small) > 8 {
		t.Errorf("indexRec{1,1} encodes to %d bytes: ints not compact?", len(small))
	}
}

func TestDecode_Damage(t *testing.T) {
	good, err := encode(recEvent, sampleRecords()[recEvent])
	if err != nil {
		t.Fatal(err)
	}
	var r eventRec
	if err := decode(recEvent, good, &r); err != nil {
		t.Fatal(err)
	}
	// Every truncation of a record is refused: a map declares its pairs,
	// a string its length.
	for n := range good {
		if err := decode(recEvent, good[:n], &eventRec{}); err == nil {
			t.Errorf("the first %d of %d bytes accepted", n, len(good))
		}
	}
	cases := map[string]struct {
		b    []byte
		want string
	}{
		"nil":                  {nil, "truncated"},
		"truncated payload":    {good[:len(good)-1], "msgpack"},
		"extra byte":           {append(bytes.Clone(good), 0), "trailing"},
		"over the limit":       {make([]byte, maxRecordBytes+1), "limit"},
		"huge array":           {hugeArray, "items declared"},
		"not msgpack":          {[]byte{0xc1}, "invalid code"},
		"wrong shape":          {[]byte{0xa3, 'a', 'b', 'c'}, "msgpack"},
		"fewer pairs declared": {withByte(good, 0, 0x81), "trailing"},
	}
	for name, tc := range cases {
		err := decode(recEvent, tc.b, &eventRec{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: decode = %v, want an error about %q", name, err, tc.want)
		}
	}
}

func withByte(b []byte, i int, v byte) []byte {
	c := bytes.Clone(b)
	c[i] = v
	return c
}

func TestEncode_TooLarge(t *testing.T) {
	big := &eventRec{V: 1, Seq: 1, Kind: tier.KindUser, Text: strings.Repeat("x", maxRecordBytes)}
	if _, err := encode(recEvent, big); err == nil {
		t.Error("a record over maxRecordBytes was encoded")
	}
	// The encoder is reusable after refusing.
	if _, err := encode(recIndex, &indexRec{V: 1, ID: 1}); err != nil {
		t.Error(err)
	}
}

func TestKeys(t *testing.T) {
	for _, v := range []uint64{0, 1, 255, 256, 1 << 40, ^uint64(0)} {
		k := u64(v)
		if got, err := parseU64(k); err != nil || got != v {
			t.Errorf("parseU64(u64(%d)) = %d, %v", v, got, err)
		}
	}
	if bytes.Compare(u64(255), u64(256)) >= 0 || bytes.Compare(u64(1<<32), u64(1<<32+1)) >= 0 {
		t.Error("keys do not sort numerically")
	}
	if _, err := parseU64([]byte{1, 2, 3}); err == nil {
		t.Error("a 3-byte key parsed")
	}
}

// realEventRecords encodes the first n events of the first real session
// (../shared/data/real), as the store stores them; none if absent.
func realEventRecords(tb testing.TB, n int) [][]byte {
	files, _ := filepath.Glob(filepath.Join("..", "..", "shared", "data", "real", "*.jsonl"))
	if len(files) == 0 {
		return nil
	}
	f, err := os.Open(files[0])
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	rd := tier.NewReader(f, files[0], tier.Limits{})
	l := tier.NewLedger()
	var out [][]byte
	for seq := uint64(1); len(out) < n; seq++ {
		r, err := rd.Next()
		if err != nil {
			break
		}
		e := r.Event
		e.Seq, e.Time = seq, 1740830400000000000+int64(seq)
		if err := l.Apply(&e); err != nil {
			tb.Fatal(err)
		}
		rec := toEventRec(&e)
		b, err := encode(recEvent, &rec)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// FuzzDecode feeds arbitrary bytes to decode, into every record type:
// decode must never panic or allocate unboundedly, and what it accepts must
// re-encode to a value that decodes to the same bytes again.
func FuzzDecode(f *testing.F) {
	for rt, v := range sampleRecords() {
		b, err := encode(rt, v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, b := range realEventRecords(f, 8) {
		f.Add(b)
	}
	f.Add(hugeArray)
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Add(append(bytes.Repeat([]byte{0x91}, 40), 0xc0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		for rt := recState; rt <= recRef; rt++ {
			v := emptyRecord(rt)
			if err := decode(rt, in, v); err != nil {
				continue
			}
			b1, err := encode(rt, v)
			if err != nil {
				t.Fatalf("type %d: re-encoding a decoded record: %v", rt, err)
			}
			v2 := emptyRecord(rt)
			if err := decode(rt, b1, v2); err != nil {
				t.Fatalf("type %d: decoding a re-encoded record: %v", rt, err)
			}
			if b2, _ := encode(rt, v2); !bytes.Equal(b1, b2) {
				t.Fatalf("type %d: encoding is not stable", rt)
			}
		}
		// What checkMsgpack lets through, msgpack can decode into anything
		// without panicking or allocating past the input's size.
		if checkMsgpack(in) == nil {
			var x any
			_ = msgpack.Unmarshal(in, &x)
		}
	})
}
