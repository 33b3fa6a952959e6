package bench

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/strata-go/strata/tier"
)

// Session is one session's events, in order, as an agent would append them.
type Session struct {
	ID     string
	Events []tier.Event
}

// Count returns the number of events in sessions.
func Count(sessions []Session) int {
	n := 0
	for i := range sessions {
		n += len(sessions[i].Events)
	}
	return n
}

// RealDir returns the directory of the real sessions (../shared/data/real
// seen from the module root), looked for from the working directory
// upwards, or "" when absent.
func RealDir() string {
	for _, up := range []string{".", "..", "../..", "../../..", "../../../.."} {
		dir := filepath.Join(up, "..", "shared", "data", "real")
		if m, _ := filepath.Glob(filepath.Join(dir, "*.jsonl")); len(m) > 0 {
			return dir
		}
	}
	return ""
}

// LoadReal reads every *.jsonl file of dir, one session per file, in file
// name order.
func LoadReal(dir string) ([]Session, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []Session
	for _, f := range files {
		s, err := loadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func loadFile(path string) (Session, error) {
	f, err := os.Open(path)
	if err != nil {
		return Session{}, err
	}
	defer f.Close()
	rd := tier.NewReader(f, path, tier.Limits{})
	s := Session{ID: strings.TrimSuffix(filepath.Base(path), ".jsonl")}
	for {
		rec, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return s, err
		}
		e := rec.Event
		e.Seq = 0 // the store assigns them, as for a live agent
		s.Events = append(s.Events, e)
	}
	return s, nil
}

// Synth generates a deterministic agent session of n events: turns of a
// user message, tool calls and their results (some failed), assistant
// messages, and now and then a constraint, a rejection or an artifact.
// Keys come from small pools, so that the state the log implies (open
// calls, dispositions, constraints, artifacts) stays bounded however long
// the history: what must stay flat then is the store's cost, not the
// context's size. A failed call is a fact of its own for ever (every
// summary over it names it), so calls fail only among the first
// maxFailedCalls: after them, the state is bounded too. Texts are 40–1,500 bytes, about 450 on average, the
// shape of the real sessions.
func Synth(id string, n int, seed uint64) Session {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	s := Session{ID: id, Events: make([]tier.Event, 0, n)}
	call := 0
	turn := uint64(0)
	text := func() string { return words(r, 40+int(r.ExpFloat64()*400)%1460) }
	for len(s.Events) < n {
		turn++
		add := func(e tier.Event) {
			if len(s.Events) < n {
				e.Turn = turn
				e.Time = synthEpoch + int64(len(s.Events))*1e9
				s.Events = append(s.Events, e)
			}
		}
		add(tier.Event{Kind: tier.KindUser, Text: text()})
		switch r.IntN(16) {
		case 0:
			add(tier.Event{Kind: tier.KindConstraint, Key: fmt.Sprintf("constraint/%d", r.IntN(8)), Text: text()})
		case 1:
			add(tier.Event{Kind: tier.KindRejected, Key: fmt.Sprintf("approach/%d", r.IntN(12)), Text: text()})
		case 2:
			add(tier.Event{Kind: tier.KindArtifact, Key: fmt.Sprintf("src/file%d.go", r.IntN(12)), Text: text()})
		}
		for k := r.IntN(4); k > 0; k-- {
			call++
			id := fmt.Sprintf("call_%d", call)
			add(tier.Event{Kind: tier.KindToolCall, ID: id, Name: "bash", Text: text()})
			res := tier.Event{Kind: tier.KindToolResult, ID: id, Text: text()}
			if r.IntN(8) == 0 && call <= maxFailedCalls {
				res.Failed, res.Key = true, fmt.Sprintf("approach/%d", r.IntN(12))
			}
			if len(s.Events)+1 < n { // never leave the last call open
				add(res)
			} else {
				s.Events = s.Events[:len(s.Events)-1]
				call--
			}
		}
		add(tier.Event{Kind: tier.KindAssistant, Text: text()})
	}
	return s
}

// maxFailedCalls is how many of a synthetic session's first calls may fail
// (one in eight of them does).
const maxFailedCalls = 256

// synthEpoch is the time of a synthetic session's first event.
const synthEpoch = 1_750_000_000_000_000_000

var vocabulary = strings.Fields(`the a to of and in is it that for on with as was this file test
function error return value import package go run build change line fix add remove update check
database store session event marker summary compaction node ledger open call result failed`)

func words(r *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(vocabulary[r.IntN(len(vocabulary))])
	}
	return b.String()
}

// eventRec is strata's stored event record (store/schema.go), field for
// field and tag for tag, so that the peers store byte-identical msgpack
// (TestSmoke checks it against what strata wrote).
type eventRec struct {
	V      int       `msgpack:"v"`
	Seq    uint64    `msgpack:"q"`
	Turn   uint64    `msgpack:"t,omitempty"`
	Time   int64     `msgpack:"m,omitempty"`
	Kind   tier.Kind `msgpack:"k"`
	ID     string    `msgpack:"i,omitempty"`
	Key    string    `msgpack:"y,omitempty"`
	Name   string    `msgpack:"n,omitempty"`
	Failed bool      `msgpack:"f,omitempty"`
	By     string    `msgpack:"b,omitempty"`
	Text   string    `msgpack:"x,omitempty"`
	Opener uint64    `msgpack:"o,omitempty"`
}

// Encoder encodes events as strata does: msgpack with compact ints.
type Encoder struct {
	buf []byte
	w   bytesWriter
	enc *msgpack.Encoder
}

type bytesWriter struct{ b *[]byte }

// Write implements io.Writer, appending to the slice.
func (w bytesWriter) Write(p []byte) (int, error) { *w.b = append(*w.b, p...); return len(p), nil }

// NewEncoder returns an Encoder; it is not safe for concurrent use.
func NewEncoder() *Encoder {
	e := &Encoder{}
	e.w = bytesWriter{&e.buf}
	e.enc = msgpack.NewEncoder(e.w)
	e.enc.UseCompactInts(true)
	return e
}

// Encode returns the msgpack of e with seq, in a new slice.
func (en *Encoder) Encode(e *tier.Event, seq uint64) []byte {
	en.buf = en.buf[:0]
	rec := eventRec{V: 1, Seq: seq, Turn: e.Turn, Time: e.Time, Kind: e.Kind, ID: e.ID, Key: e.Key,
		Name: e.Name, Failed: e.Failed, By: e.By, Text: e.Text, Opener: e.Opener}
	if err := en.enc.Encode(&rec); err != nil {
		panic(err) // a struct of strings and ints always encodes
	}
	return append([]byte(nil), en.buf...)
}

// MsgpackBytes returns the total msgpack size of sessions' events as the
// peers store them (seq assigned 1, 2, 3… per session).
func MsgpackBytes(sessions []Session) int64 {
	en := NewEncoder()
	var n int64
	for i := range sessions {
		for j := range sessions[i].Events {
			n += int64(len(en.Encode(&sessions[i].Events[j], uint64(j+1))))
		}
	}
	return n
}
