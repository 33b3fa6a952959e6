package tier_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/tier"
)

// readAll reads every record of s, stopping at the first error.
func readAll(t testing.TB, s string, lim tier.Limits) ([]tier.Record, error) {
	t.Helper()
	rd := tier.NewReader(strings.NewReader(s), "test.jsonl", lim)
	var out []tier.Record
	for {
		r, err := rd.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}

func TestReader_Valid(t *testing.T) {
	in := `{"session":"mig","kind":"user","text":"hello"}

{"kind":"tool_call","id":"c1","name":"bash","text":"ls","turn":3}
   ` + "\t" + `
{"kind":"tool_result","id":"c1","ok":false,"key":"approach/a","text":"boom","seq":4}
{"kind":"superseded","key":"a","by":"b","time":"2024-08-06T08:47:10.123456789+02:00"}
{"kind":"close","id":"h","ok":true}` // no final newline
	recs, err := readAll(t, in, tier.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 5 {
		t.Fatalf("%d records, want 5", len(recs))
	}
	wantLines := []int{1, 3, 5, 6, 7}
	for i, r := range recs {
		if r.Line != wantLines[i] {
			t.Errorf("record %d: line %d, want %d", i, r.Line, wantLines[i])
		}
	}
	if recs[0].Session != "mig" || recs[1].Session != "" {
		t.Errorf("sessions %q %q", recs[0].Session, recs[1].Session)
	}
	if e := recs[0].Event; e.Kind != tier.KindUser || e.Text != "hello" || e.Seq != 0 || e.Turn != 0 || e.Time != 0 {
		t.Errorf("user: %+v", e)
	}
	if e := recs[1].Event; e.Kind != tier.KindToolCall || e.ID != "c1" || e.Name != "bash" || e.Turn != 3 {
		t.Errorf("tool_call: %+v", e)
	}
	if e := recs[2].Event; !e.Failed || e.Key != "approach/a" || e.Seq != 4 {
		t.Errorf("tool_result: %+v", e)
	}
	want := time.Date(2024, 8, 6, 6, 47, 10, 123456789, time.UTC).UnixNano()
	if e := recs[3].Event; e.By != "b" || e.Time != want {
		t.Errorf("superseded: %+v, want time %d", e, want)
	}
	if e := recs[4].Event; e.Failed {
		t.Errorf(`close with "ok":true is Failed`)
	}
}

func TestReader_BadInput(t *testing.T) {
	good := `{"kind":"user","text":"fine"}` + "\n"
	cases := []struct {
		name string
		line string
		want error
		// event says the cause must also be an *EventError
		event bool
	}{
		{"unknown kind", `{"kind":"thought","text":"x"}`, tier.ErrUnknownKind, true},
		{"missing kind", `{"text":"x"}`, tier.ErrUnknownKind, true},
		{"kind of the wrong case", `{"kind":"User"}`, tier.ErrUnknownKind, true},
		{"tool_call without id", `{"kind":"tool_call","name":"bash"}`, tier.ErrMissingID, true},
		{"tool_result without id", `{"kind":"tool_result","ok":true}`, tier.ErrMissingID, true},
		{"open without id", `{"kind":"open","name":"file"}`, tier.ErrMissingID, true},
		{"close with an empty id", `{"kind":"close","id":""}`, tier.ErrMissingID, true},
		{"constraint without key", `{"kind":"constraint","text":"x"}`, tier.ErrMissingKey, true},
		{"withdrawn without key", `{"kind":"withdrawn"}`, tier.ErrMissingKey, true},
		{"rejected without key", `{"kind":"rejected","text":"no"}`, tier.ErrMissingKey, true},
		{"failed without key", `{"kind":"failed"}`, tier.ErrMissingKey, true},
		{"superseded without key", `{"kind":"superseded","by":"b"}`, tier.ErrMissingKey, true},
		{"artifact without key", `{"kind":"artifact","text":"x"}`, tier.ErrMissingKey, true},
		{"invalid UTF-8 in the line", "{\"kind\":\"user\",\"text\":\"caf\xe9\"}", tier.ErrInvalidUTF8, false},
		{"invalid UTF-8 outside strings", "{\"kind\":\"user\"}\xff", tier.ErrInvalidUTF8, false},
		{"control character in id", `{"kind":"tool_call","id":"c\n1"}`, tier.ErrBadField, true},
		{"NUL in key", `{"kind":"artifact","key":"a\u0000b"}`, tier.ErrBadField, true},
		{"C1 control in key", `{"kind":"constraint","key":"a\u009bb"}`, tier.ErrBadField, true},
		{"by on rejected", `{"kind":"rejected","key":"k","by":"x"}`, tier.ErrBadField, true},
		{"by on artifact", `{"kind":"artifact","key":"k","by":"x"}`, tier.ErrBadField, true},
		{"ok on tool_call", `{"kind":"tool_call","id":"c","ok":true}`, tier.ErrBadField, true},
		{"ok on failed", `{"kind":"failed","key":"k","ok":false}`, tier.ErrBadField, true},
		{"ok on user", `{"kind":"user","ok":true}`, tier.ErrBadField, true},
		{"seq 0", `{"kind":"user","seq":0}`, tier.ErrSeqOrder, true},
		{"time not RFC 3339", `{"kind":"user","time":"yesterday"}`, tier.ErrBadField, true},
		{"time past 2262", `{"kind":"user","time":"9999-12-31T23:59:59Z"}`, tier.ErrBadField, true},
		{"time before 1678", `{"kind":"user","time":"1000-01-01T00:00:00Z"}`, tier.ErrBadField, true},
		{"not JSON", `kind=user`, tier.ErrBadJSON, false},
		{"JSON array", `["user"]`, tier.ErrBadJSON, false},
		{"unknown field", `{"kind":"user","txt":"typo"}`, tier.ErrBadJSON, false},
		{"wrong type", `{"kind":"user","seq":"1"}`, tier.ErrBadJSON, false},
		{"negative seq", `{"kind":"user","seq":-1}`, tier.ErrBadJSON, false},
		{"two objects on a line", `{"kind":"user"} {"kind":"user"}`, tier.ErrBadJSON, false},
		{"trailing garbage", `{"kind":"user"} x`, tier.ErrBadJSON, false},
		{"truncated", `{"kind":"user","text":"unfinished`, tier.ErrBadJSON, false},
		{"id over the size limit", `{"kind":"tool_call","id":"` + strings.Repeat("i", tier.DefaultMaxIDBytes+1) + `"}`, tier.ErrTooLarge, true},
		{"lone high surrogate in text", `{"kind":"user","text":"a\ud800b"}`, tier.ErrInvalidUTF8, true},
		{"lone low surrogate in text", `{"kind":"user","text":"\uDC00"}`, tier.ErrInvalidUTF8, true},
		{"high surrogate before a letter", `{"kind":"user","text":"\ud83d\u0041"}`, tier.ErrInvalidUTF8, true},
		{"high surrogate at the end of a text", `{"kind":"user","text":"ok \ud83d"}`, tier.ErrInvalidUTF8, true},
		{"two high surrogates", `{"kind":"user","text":"\ud83d\ud83d\ude00"}`, tier.ErrInvalidUTF8, true},
		{"lone surrogate after an escaped backslash", `{"kind":"user","text":"\\\ud800"}`, tier.ErrInvalidUTF8, true},
		{"lone surrogate in an id", `{"kind":"tool_call","id":"c\ud800"}`, tier.ErrInvalidUTF8, true},
		{"lone surrogate in a key", `{"kind":"artifact","key":"\udfff.txt"}`, tier.ErrInvalidUTF8, true},
		{"lone surrogate in the session", `{"session":"s\ud800","kind":"user"}`, tier.ErrInvalidUTF8, true},
		{"turn 2^64-40", `{"kind":"user","turn":18446744073709551576}`, tier.ErrBadField, true},
		{"turn over 2^53", `{"kind":"user","turn":9007199254740993}`, tier.ErrBadField, true},
		{"seq over 2^53", `{"kind":"user","seq":9007199254740993}`, tier.ErrBadField, true},
		{"turn over uint64", `{"kind":"user","turn":18446744073709551616}`, tier.ErrBadJSON, false},
		{"superseded by itself", `{"kind":"superseded","key":"plan@v1","by":"plan@v1","text":"x"}`, tier.ErrBadField, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The bad line is line 3, after a good line and a blank one.
			in := good + "\n" + tc.line + "\n" + good
			rd := tier.NewReader(strings.NewReader(in), "bad.jsonl", tier.Limits{})
			if _, err := rd.Next(); err != nil {
				t.Fatalf("line 1: %v", err)
			}
			_, err := rd.Next()
			var le *tier.LineError
			if !errors.As(err, &le) {
				t.Fatalf("Next = %v (%T), want *tier.LineError", err, err)
			}
			if le.Line != 3 || le.File != "bad.jsonl" || !strings.HasPrefix(err.Error(), "bad.jsonl:3: ") {
				t.Errorf("error %q: line %d file %q, want bad.jsonl:3", err, le.Line, le.File)
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("Next = %v, want errors.Is %v", err, tc.want)
			}
			var ee *tier.EventError
			if errors.As(err, &ee) != tc.event {
				t.Errorf("errors.As(*EventError) = %v, want %v (err %v)", !tc.event, tc.event, err)
			}
			// The error names the kind the line has, whatever else is
			// wrong with it.
			var line struct{ Kind string }
			if ee != nil && json.Unmarshal([]byte(tc.line), &line) == nil && line.Kind != "" && ee.Kind != line.Kind {
				t.Errorf("the error names kind %q, the line has %q", ee.Kind, line.Kind)
			}
			for _, other := range allSentinels {
				if other != tc.want && errors.Is(err, other) {
					t.Errorf("error %v also matches %v", err, other)
				}
			}
			// Nothing of the bad line leaks into the next record, and
			// reading goes on at the right line.
			r, err := rd.Next()
			if err != nil || r.Line != 4 || r.Event.Text != "fine" {
				t.Errorf("after the bad line: %+v, %v", r, err)
			}
		})
	}
}

func TestReader_LineTooLong(t *testing.T) {
	lim := tier.Limits{MaxEventBytes: 100, MaxIDBytes: 10}
	// The reader allows for JSON escaping (6 bytes per byte) plus 64 KiB
	// of field names; a longer line is refused without being held whole.
	long := `{"kind":"user","text":"` + strings.Repeat("a", 200<<10) + `"}`
	in := `{"kind":"user","text":"one"}` + "\n" + long + "\n" + `{"kind":"user","text":"three"}` + "\n" + long
	rd := tier.NewReader(strings.NewReader(in), "long.jsonl", lim)
	if r, err := rd.Next(); err != nil || r.Line != 1 {
		t.Fatalf("line 1: %+v %v", r, err)
	}
	_, err := rd.Next()
	var le *tier.LineError
	if !errors.As(err, &le) || le.Line != 2 || !errors.Is(err, tier.ErrTooLarge) {
		t.Fatalf("line 2: %v, want a LineError at line 2 that Is ErrTooLarge", err)
	}
	if r, err := rd.Next(); err != nil || r.Line != 3 || r.Event.Text != "three" {
		t.Fatalf("line 3: %+v %v", r, err)
	}
	// The last line has no newline.
	if _, err := rd.Next(); !errors.As(err, &le) || le.Line != 4 || !errors.Is(err, tier.ErrTooLarge) {
		t.Fatalf("line 4: %v", err)
	}
	if _, err := rd.Next(); err != io.EOF {
		t.Fatalf("after the last line: %v, want io.EOF", err)
	}

	// A line under the line limit whose text is over MaxEventBytes is
	// refused as an event.
	_, err = readAll(t, `{"kind":"user","text":"`+strings.Repeat("b", 101)+`"}`, lim)
	var ee *tier.EventError
	if !errors.As(err, &le) || le.Line != 1 || !errors.As(err, &ee) || !errors.Is(err, tier.ErrTooLarge) {
		t.Fatalf("text over MaxEventBytes: %v", err)
	}
	// Heavily escaped text within the limit is accepted.
	esc := strings.Repeat(`\u0001`, 100)
	recs, err := readAll(t, `{"kind":"user","text":"`+esc+`"}`, lim)
	if err != nil || len(recs) != 1 || len(recs[0].Event.Text) != 100 {
		t.Fatalf("escaped text: %v", err)
	}
}

// Surrogate pairs, escaped in any case, are one rune; an escaped backslash
// before "ud800" is text, not an escape.
func TestReader_SurrogatePairs(t *testing.T) {
	in := `{"kind":"user","text":"\ud83d\ude00 \uD83D\uDE00 \\ud800 \\\\ud800 \u00e9\ud7ff\ue000","key":""}` + "\n" +
		`{"kind":"artifact","key":"\ud834\udd1e","text":"\""}`
	recs, err := readAll(t, in, tier.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := recs[0].Event.Text, "😀 😀 \\ud800 \\\\ud800 é\ud7ff\ue000"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	if got := recs[1].Event.Key; got != "𝄞" {
		t.Errorf("key %q, want U+1D11E", got)
	}
}

// The error for a lone surrogate names the field and the escape.
func TestReader_LoneSurrogateNamed(t *testing.T) {
	_, err := readAll(t, `{"kind":"tool_call","id":"c1","name":"bash","text":"echo \udead"}`, tier.Limits{})
	var ee *tier.EventError
	if !errors.As(err, &ee) || !errors.Is(err, tier.ErrInvalidUTF8) {
		t.Fatalf("err = %v, want an *EventError that Is ErrInvalidUTF8", err)
	}
	if ee.Detail != `lone surrogate \udead in text` || ee.Kind != "tool_call" || ee.ID != "c1" {
		t.Errorf("error %+v", ee)
	}
}

// A value an error quotes is clipped: a million-digit seq, a megabyte of
// time, kind or field name does not come back whole in the message, and
// the message still says which field is wrong.
func TestReader_ErrorsAreClipped(t *testing.T) {
	big := strings.Repeat("9", 1<<20)
	for _, tc := range []struct {
		name, line, field string
		want              error
	}{
		{"million-digit seq", `{"kind":"user","seq":` + big + `}`, "seq", tier.ErrBadJSON},
		{"million-digit turn", `{"kind":"user","turn":-` + big + `}`, "turn", tier.ErrBadJSON},
		{"seq of a megabyte string", `{"kind":"user","seq":"` + big + `"}`, "seq", tier.ErrBadJSON},
		{"megabyte time", `{"kind":"user","time":"` + big + `"}`, "time", tier.ErrBadField},
		{"megabyte kind", `{"kind":"` + big + `"}`, "kind", tier.ErrUnknownKind},
		{"megabyte field name", `{"kind":"user","` + big + `":1}`, "unknown field", tier.ErrBadJSON},
		{"megabyte session with a lone surrogate", `{"kind":"user","session":"` + big + `\ud800"}`, "session", tier.ErrInvalidUTF8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readAll(t, tc.line, tier.Limits{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %.300v, want %v", err, tc.want)
			}
			msg := err.Error()
			if len(msg) > 1024 {
				t.Errorf("the message is %d bytes: %.200q…", len(msg), msg)
			}
			if !strings.Contains(msg, tc.field) {
				t.Errorf("message %q does not name %s", msg, tc.field)
			}
		})
	}
}

type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		f.n++
		return copy(p, "{\"kind\":\"user\"}\n{\"kind\""), nil
	}
	return 0, errors.New("disk on fire")
}

func TestReader_ReadError(t *testing.T) {
	rd := tier.NewReader(&failingReader{}, "f.jsonl", tier.Limits{})
	if _, err := rd.Next(); err != nil {
		t.Fatal(err)
	}
	_, err := rd.Next()
	if err == nil || err == io.EOF || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("Next = %v, want the read error", err)
	}
}

// allKindsEvents returns one event of every kind, as the store would hold
// them (seq, turn and time set), forming a valid log.
func allKindsEvents() []tier.Event {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC).UnixNano()
	evs := []tier.Event{
		{Kind: tier.KindSystem, Text: "you are an agent"},
		{Kind: tier.KindUser, Text: "Migrate users.email to citext. \"Quoted\" \\ and ünïcödé ✓", Ref: "msg-1"},
		{Kind: tier.KindConstraint, Key: "reversible", Text: "must be reversible"},
		{Kind: tier.KindAssistant, Text: "ok\nmultiline\ttext\x00with NUL"},
		{Kind: tier.KindToolCall, ID: "c1", Name: "bash", Text: "psql -f up.sql", Ref: "rec/7"},
		{Kind: tier.KindToolResult, ID: "c1", Failed: true, Key: "approach/add-column", Text: "lock timeout", Ref: "rec/7"},
		{Kind: tier.KindOpen, ID: "h1", Name: "file", Text: "/tmp/x"},
		{Kind: tier.KindClose, ID: "h1"},
		{Kind: tier.KindRejected, Key: "approach/add-column", Text: "user said no"},
		{Kind: tier.KindFailed, Key: "approach/b", Text: "did not work"},
		{Kind: tier.KindSuperseded, Key: "approach/b", By: "approach/c", Text: "replaced"},
		{Kind: tier.KindArtifact, Key: "migrations/003_down.sql", Text: "rollback"},
		{Kind: tier.KindWithdrawn, Key: "reversible"},
		{Kind: tier.KindToolCall, ID: "c2", Name: "edit"},
		{Kind: tier.KindToolResult, ID: "c2", Text: "done"},
	}
	turn := uint64(0)
	for i := range evs {
		if evs[i].Kind == tier.KindUser {
			turn++
		}
		evs[i].Seq = uint64(i + 1)
		evs[i].Turn = turn
		evs[i].Time = t0 + int64(i)*int64(time.Millisecond) + int64(i)
	}
	return evs
}

func TestEvent_ToJSON_RoundTrip(t *testing.T) {
	evs := allKindsEvents()
	seen := map[tier.Kind]bool{}
	var buf bytes.Buffer
	for i := range evs {
		seen[evs[i].Kind] = true
		j := evs[i].ToJSON("sess-1")
		if j.Seq == nil || *j.Seq != evs[i].Seq || j.Turn == nil || *j.Turn != evs[i].Turn || j.Kind != evs[i].Kind.String() {
			t.Errorf("ToJSON(%+v) = %+v", evs[i], j)
		}
		if (j.OK != nil) != evs[i].Kind.Resolves() {
			t.Errorf("%v: ok present = %v", evs[i].Kind, j.OK != nil)
		}
		b, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if len(seen) != len(tier.Kinds()) {
		t.Fatalf("the log covers %d kinds, want all %d", len(seen), len(tier.Kinds()))
	}
	recs, err := readAll(t, buf.String(), tier.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(evs) {
		t.Fatalf("%d records, want %d", len(recs), len(evs))
	}
	for i, r := range recs {
		if r.Session != "sess-1" || r.Line != i+1 {
			t.Errorf("record %d: session %q line %d", i, r.Session, r.Line)
		}
		if r.Event != evs[i] {
			t.Errorf("record %d:\n got %+v\nwant %+v", i, r.Event, evs[i])
		}
	}
	// Opener is the store's: ToJSON does not carry it, replay recomputes it.
	e := evs[5]
	e.Opener = 5
	j := e.ToJSON("s")
	b, _ := json.Marshal(j)
	if bytes.Contains(b, []byte("opener")) || bytes.Contains(b, []byte(`"Opener"`)) {
		t.Errorf("ToJSON carries the opener: %s", b)
	}
}

func TestEventJSON_TimeAbsent(t *testing.T) {
	e := tier.Event{Seq: 1, Kind: tier.KindUser, Text: "x"}
	j := e.ToJSON("")
	if j.Time != "" || j.Session != "" {
		t.Errorf("ToJSON of an event without time: %+v", j)
	}
	b, _ := json.Marshal(j)
	if bytes.Contains(b, []byte("time")) || bytes.Contains(b, []byte("session")) {
		t.Errorf("absent fields encoded: %s", b)
	}
}

func TestReader_Incident(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "testdata", "incident", "migration.jsonl"))
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	rd := tier.NewReader(f, "migration.jsonl", tier.Limits{})
	l := tier.NewLedger()
	n := 0
	for {
		r, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		e := r.Event
		e.Seq = uint64(n)
		if err := l.Apply(&e); err != nil {
			t.Fatalf("line %d: %v", r.Line, err)
		}
	}
	if n == 0 {
		t.Fatal("no events")
	}
	if _, ok := l.Dispositions["approach/add-column-then-backfill"]; !ok {
		t.Errorf("the incident's rejection is not in the ledger: %+v", l.Dispositions)
	}
}

// FuzzReader checks that the reader never panics, that every event it
// accepts passes Check, and that an accepted event survives ToJSON → JSON →
// Reader unchanged.
func FuzzReader(f *testing.F) {
	seeds := []string{
		`{"session":"mig","kind":"user","text":"Migrate users.email to citext."}`,
		`{"kind":"tool_result","id":"c1","ok":false,"key":"approach/a","text":"dry run failed"}`,
		`{"kind":"superseded","key":"a","by":"b","seq":3,"turn":2,"time":"2024-08-06T08:47:10Z"}`,
		`{"kind":"open","id":"h","name":"file"}` + "\n" + `{"kind":"close","id":"h","ok":true}`,
		`{"kind":"tool_call","id":"c\u0000"}`,
		"{\"kind\":\"user\",\"text\":\"\xff\"}",
		`{"kind":"user","seq":0}`,
		`{"kind":"user","time":"9999-12-31T23:59:59Z"}`,
		`{"kind":"user","text":"\ud800 \ud83d\ude00 \\ud800","turn":18446744073709551576}`,
		`{"kind":"superseded","key":"a","by":"a"}`,
		`{"kind":"user"} {"kind":"user"}`,
		"\xdd\xff\xff\xff\xff",
		"",
		"\n\n\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	for _, name := range []string{filepath.Join("..", "testdata", "incident", "migration.jsonl")} {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	if files, _ := filepath.Glob(filepath.Join("..", "..", "shared", "data", "real", "*.jsonl")); len(files) > 0 {
		for _, name := range files[:min(3, len(files))] {
			if b, err := os.ReadFile(name); err == nil {
				f.Add(b[:min(len(b), 16<<10)])
			}
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		lim := tier.Limits{MaxEventBytes: 4 << 10, MaxIDBytes: 64}
		rd := tier.NewReader(bytes.NewReader(in), "fuzz", lim)
		for i := 0; i < 1000; i++ {
			r, err := rd.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				var le *tier.LineError
				if !errors.As(err, &le) {
					t.Fatalf("error %v is not a *LineError", err)
				}
				continue
			}
			e := r.Event
			if err := e.Check(lim); err != nil {
				t.Fatalf("accepted an event that Check refuses: %v", err)
			}
			if e.Seq == 0 {
				e.Seq = 1 // as the store assigns it
			}
			b, err := json.Marshal(e.ToJSON(r.Session))
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			back, err := readAll(t, string(b), lim)
			if err != nil || len(back) != 1 {
				t.Fatalf("re-reading %s: %v", b, err)
			}
			if back[0].Event != e || back[0].Session != r.Session {
				t.Fatalf("round trip:\n got %+v\nwant %+v", back[0].Event, e)
			}
		}
	})
}
