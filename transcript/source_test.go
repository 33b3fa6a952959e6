package transcript_test

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/transcript"
)

// messageList returns a JSON list of n short messages, one a line.
func messageList(n int) string {
	var b strings.Builder
	b.WriteString("[\n")
	for i := range n {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"role":%q,"content":"message %d"}`, role, i)
	}
	b.WriteString("\n]")
	return b.String()
}

// big is more messages than fit in threshold, the size from which the
// tests read an object of an input that can be read again member by
// member (transcript.SetBigValue).
const (
	big       = 1000
	threshold = 16 << 10
)

// onlyReader hides every method of a reader but Read: the decoder cannot
// read it again, so it reads each top-level value whole.
type onlyReader struct{ io.Reader }

// A conversation object too large to read whole is read member by member
// and its messages streamed, with the result of reading it whole — the
// same sessions, events, refs, lines and counts — whatever the order of
// its members: its id or system prompt after the messages, a role that
// makes it a message after all, a list under a key tried later, another
// value after it.
func TestRead_LargeObjectAsIfWhole(t *testing.T) {
	transcript.SetBigValue(t, threshold)
	list := messageList(big)
	cases := []struct {
		name    string
		f       transcript.Format
		in      string
		records int
	}{
		{"id first", transcript.OpenAI, `{"id":"c1","title":{"a":[1,{"b":2}]},"messages":` + list + "}\n", big},
		{"id after the messages", transcript.OpenAI, `{"messages":` + list + `,"id":"c1"}`, big},
		{"no id", transcript.OpenAI, "\n\n{\"model\":\"m\",\n\"messages\":" + list + "}", big},
		{"system first", transcript.Anthropic, `{"system":"be brief","messages":` + list + `}`, big + 1},
		{"system after the messages", transcript.Anthropic, `{"messages":` + list + `,"system":[{"type":"text","text":"be brief"}]}`, big + 1},
		{"a message after all", transcript.OpenAI, `{"messages":` + list + `,"role":"user","content":"hi"}`, 1},
		{"the list under a later key", transcript.OpenAI, `{"messages":[],"history":` + list + `,"input":"x"}`, big},
		{"a list of no messages", transcript.OpenAI, `{"messages":[1,2,3],"turns":` + list + `}`, big},
		{"no list of messages", transcript.OpenAI, `{"role":"user","content":"a"}` + "\n" + `{"items":` + list + `}`, 2},
		{"a key twice", transcript.OpenAI, `{"messages":[{"role":"user","content":"first"}],"messages":` + list + `}`, big},
		{"two conversations", transcript.OpenAI, `{"messages":` + list + "}\n" + `{"id":"c2","messages":[{"role":"user","content":"hi"}]}`, big + 1},
		{"a top-level array", transcript.OpenAI, list, big},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := transcript.Options{File: "conv.json"}
			want, wantRep, wantErr := transcript.Read(c.f, onlyReader{strings.NewReader(c.in)}, opts)
			got, gotRep, err := transcript.Read(c.f, strings.NewReader(c.in), opts)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Fatalf("err = %v, read whole: %v", err, wantErr)
			}
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotRep, wantRep) {
				t.Errorf("read member by member: %d sessions, report %s; read whole: %d sessions, report %s", len(got), &gotRep, len(want), &wantRep)
			}
			if wantErr != nil || wantRep.Records != c.records {
				t.Errorf("read whole: err %v, %d records, want %d", wantErr, wantRep.Records, c.records)
			}
		})
	}
}

// A conversation object over Options.MaxRecordBytes, of messages under it,
// is read when the input can be read again: its messages one at a time,
// never the object whole. Read only forward, it is refused as too large.
func TestRead_LargeObjectNotHeldWhole(t *testing.T) {
	transcript.SetBigValue(t, threshold)
	in := `{"id":"c1","messages":` + messageList(2*big) + `}`
	limit := 2 * threshold
	if len(in) < 2*limit {
		t.Fatalf("the object is %d bytes, want over %d", len(in), 2*limit)
	}
	opts := transcript.Options{File: "conv.json", MaxRecordBytes: limit}
	ss, rep, err := transcript.Read(transcript.OpenAI, bytes.NewReader([]byte(in)), opts)
	if err != nil || len(ss) != 1 || ss[0].ID != "c1" || len(ss[0].Events) != 2*big || rep.Records != 2*big {
		t.Fatalf("read again: err %v, report %s, want %d messages in session c1", err, &rep, 2*big)
	}
	if last := ss[0].Lines[2*big-1]; last != 2*big+1 {
		t.Errorf("the last message on line %d, want %d", last, 2*big+1)
	}
	_, _, err = transcript.Read(transcript.OpenAI, onlyReader{strings.NewReader(in)}, opts)
	if !errors.Is(err, transcript.ErrTooLarge) {
		t.Errorf("read forward only: err = %v, want ErrTooLarge", err)
	}
	// A top-level array is read an element at a time, from any reader.
	ss, _, err = transcript.Read(transcript.OpenAI, onlyReader{strings.NewReader(messageList(2 * big))}, opts)
	if err != nil || len(ss) != 1 || len(ss[0].Events) != 2*big {
		t.Errorf("a top-level array over the limit: err %v, want %d messages", err, 2*big)
	}
}

// Bad JSON in a large conversation object — in a message of its list, in
// a member after it, the input cut short — is an error naming the line
// it is on, read member by member as read whole.
func TestRead_LargeObjectBadInput(t *testing.T) {
	transcript.SetBigValue(t, threshold)
	list := messageList(big)
	bad := strings.Replace(list, `{"role":"user","content":"message 600"}`, `{"role":"user","content":"message 600"]`, 1)
	cut := `{"messages":` + list[:len(list)/2]
	cases := []struct {
		name  string
		in    string
		line  int
		cause error
	}{
		{"a bad message", `{"id":"c1","messages":` + bad + `}`, 602, transcript.ErrBadJSON},
		{"a bad member after the list", `{"messages":` + list + ",\n\"id\": }", big + 3, transcript.ErrBadJSON},
		{"cut short", cut, strings.Count(cut, "\n") + 1, transcript.ErrBadJSON},
		{"a bad key", `{"messages":` + list + ",\n7:1}", big + 3, transcript.ErrBadJSON},
		{"a large string", "\n\"" + strings.Repeat("x", 2*threshold) + "\"", 2, transcript.ErrBadRecord},
		{"a value over the limit in the list", `{"messages":` + strings.Replace(list, "\n]", ",\n\""+strings.Repeat("x", 2*threshold)+"\"\n]", 1) + `}`, big + 2, transcript.ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			readers := []io.Reader{strings.NewReader(c.in), onlyReader{strings.NewReader(c.in)}}
			opts := transcript.Options{File: "conv.json"}
			if errors.Is(c.cause, transcript.ErrTooLarge) {
				readers = readers[:1] // read forward only, the object is what is too large
				opts.MaxRecordBytes = 2 * threshold
			}
			for _, r := range readers {
				_, _, err := transcript.Read(transcript.OpenAI, r, opts)
				var le *transcript.LineError
				if !errors.As(err, &le) || le.File != "conv.json" || le.Line != c.line || !errors.Is(err, c.cause) {
					t.Errorf("%T: err = %v, want a LineError at conv.json:%d wrapping %v", r, err, c.line, c.cause)
				}
			}
		})
	}
}
