package companion

import (
	"bytes"
	"io"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// strataRefPrefix starts the refs of the events the hook adds to a
// session itself (the check of the agent's summary, an injection): no
// record of a transcript has such a ref.
const strataRefPrefix = "strata:"

// appendBatch is the most events one Append of an import takes.
var appendBatch = store.MaxAppendEvents

// maxAppendTries bounds how often an import decodes again when another
// process stored records of the session meanwhile (a PostgreSQL store;
// a file's lock keeps other processes out).
const maxAppendTries = 4

// maxAnchorSteps bounds how far back from the head the import looks for
// the last event made from a record of the transcript.
const maxAnchorSteps = 64

// Import is what one import of the transcript read and stored.
type Import struct {
	// From and To are the bytes of the transcript read: from the line
	// after the last record the session holds to the end of the last
	// whole line. From is 0 when the whole file was read.
	From, To int64
	// Anchor is the uuid of the last record the session held before,
	// searched for from the end of the file; "" when the session held no
	// record of a transcript. Full says the whole file was read: there
	// was no anchor, or it was not found (a file rewritten).
	Anchor string
	Full   bool
	// NotFound says the read searched the file for Anchor's record and
	// did not find it (a file rewritten): it read the whole file. An
	// agent whose every import reads the whole file (WholeReader) is
	// searched for nothing.
	NotFound bool
	// Events were appended as seqs First..Last (0, 0 for none).
	Events      int
	First, Last uint64
	// Report counts what the read held (transcript.Report), the records
	// the session held already as Known.
	Report transcript.Report
}

// sessionState is a session as an import left it, from the import's own
// reads — its snapshot, and its append — for the hook's next step.
type sessionState struct {
	exists      bool   // the store holds the session
	head        uint64 // its head
	compactedTo uint64 // the end of its compacted prefix (store.Info.CompactedTo)
	ownHead     bool   // the head is an event the hook added itself (strataRefPrefix)
}

// ImportTranscript appends to session the records of the transcript t
// of agent a that the session does not hold, reading only the part of
// the file after the last one it holds when that record is found
// (Agent.IsRecord), and the whole file otherwise (or when whole is set):
// either way a record the session holds is left out (its events carry
// its ref), so importing again adds nothing twice. Files under dir, the
// project's directory, are named relative to it in the events' keys, as
// `strata import --dir` names them (transcript.Options.Dir): the same
// file gets the same key whatever part of the transcript is read; ""
// leaves the directory to the records that name one (Claude Code's cwd,
// Codex's session_meta). The events are appended in batches of at most
// store.MaxAppendEvents.
func ImportTranscript(db *store.DB, a Agent, session string, t *TranscriptFile, dir string, whole bool) (Import, error) {
	im, _, err := importTranscript(db, a, session, t, dir, whole)
	return im, err
}

// importTranscript is ImportTranscript, returning the session as it left
// it.
func importTranscript(db *store.DB, a Agent, session string, t *TranscriptFile, dir string, whole bool) (Import, sessionState, error) {
	for try := 1; ; try++ {
		var im Import
		var ss []transcript.Session
		var at sessionState
		err := db.View(func(s *store.Snapshot) error {
			tgt, st, anchor, err := sessionTarget(s, session)
			if err != nil {
				return err
			}
			at, im.Anchor, im.To = st, anchor, t.end
			if anchor != "" && !whole && !readsWhole(a) {
				_, next, found, err := t.FindLast(JSONString(anchor), func(line []byte) bool { return a.IsRecord(line, anchor) })
				if err != nil {
					return err
				}
				if found {
					im.From = next
				}
				im.NotFound = !found
			}
			im.Full = im.From == 0
			if im.From >= im.To {
				return nil // nothing written since
			}
			ss, im.Report, err = t.decode(a, im.From, dir, tgt)
			return err
		})
		if err != nil {
			return im, sessionState{}, err
		}
		var events []tier.Event
		var lines []int
		for _, s := range ss {
			events, lines = append(events, s.Events...), append(lines, s.Lines...)
		}
		if len(events) == 0 {
			return im, at, nil
		}
		first, last, n, err := appendBatches(db, session, events)
		if n > 0 {
			im.Events, im.Last = n, last
			im.First = first
			at.exists, at.head = true, last
		}
		if err != nil {
			if n == 0 && try < maxAppendTries && headMoved(db, session, at.head) {
				continue
			}
			var ee *tier.EventError
			if errors.As(err, &ee) && n+ee.Index >= 0 && n+ee.Index < len(lines) {
				err = &transcript.LineError{File: t.path, Line: lines[n+ee.Index] + t.linesBeforeOrZero(im.From), Err: err}
			}
			return im, sessionState{}, errors.Wrapf(err, "companion: storing the records of %s", t.path)
		}
		at.ownHead = strings.HasPrefix(events[len(events)-1].Ref, strataRefPrefix)
		return im, at, nil
	}
}

// appendBatches appends events to session in batches of at most
// appendBatch, and returns the seqs of the first and last event stored
// and how many were: a batch refused leaves those before it stored, as
// an import of the same file again would store them. A batch ends
// between records: the events of one record (one ref) are appended
// together, the store taking a ref's events in one append only.
func appendBatches(db *store.DB, session string, events []tier.Event) (first, last uint64, n int, err error) {
	for len(events) > 0 {
		end := min(len(events), appendBatch)
		cut := end
		for cut > 0 && cut < len(events) && events[cut].Ref != "" && events[cut].Ref == events[cut-1].Ref {
			cut--
		}
		if cut > 0 { // else one record of more events than a batch, which the store refuses
			end = cut
		}
		batch := events[:end]
		res, err := db.Append(session, batch...)
		if err != nil {
			return first, last, n, err
		}
		if n == 0 {
			first = res.First
		}
		last, n, events = res.Last, n+len(batch), events[len(batch):]
	}
	return first, last, n, nil
}

// headMoved reports whether session's head is no longer head.
func headMoved(db *store.DB, session string, head uint64) bool {
	info, err := db.Info(session)
	return err == nil && info.Head != head
}

// sessionTarget returns where the transcript's records go — session,
// with the calls open at its head and the refs it holds — the session's
// state, and the ref of the last event made from a record of a transcript
// (the anchor of an incremental read), "" when it holds none.
func sessionTarget(s *store.Snapshot, session string) (t transcript.Target, st sessionState, anchor string, err error) {
	t = transcript.Target{Session: session, Stored: func(ref string) (bool, error) {
		_, ok, err := s.Ref(session, ref)
		return ok, err
	}}
	info, err := s.Info(session)
	if errors.Is(err, store.ErrSessionNotFound) {
		return t, st, "", nil
	}
	if err != nil {
		return t, st, "", err
	}
	st = sessionState{exists: true, head: info.Head, compactedTo: info.CompactedTo}
	l, err := s.Ledger(session)
	if err != nil {
		return t, st, "", err
	}
	for _, o := range l.OpenList() {
		if err := s.Events(session, o.Seq, o.Seq, func(e tier.Event) error {
			t.Open = append(t.Open, e)
			return nil
		}); err != nil {
			return t, st, "", err
		}
	}
	for seq := info.Head; seq > 0 && info.Head-seq < maxAnchorSteps && anchor == ""; seq-- {
		if err := s.Events(session, seq, seq, func(e tier.Event) error {
			own := strings.HasPrefix(e.Ref, strataRefPrefix)
			if seq == info.Head {
				st.ownHead = own
			}
			if e.Ref != "" && !own {
				anchor = e.Ref
			}
			return nil
		}); err != nil {
			return t, st, "", err
		}
	}
	if strings.Contains(anchor, ":") {
		anchor = "" // a ref derived from a record without a uuid: not searchable
	}
	return t, st, anchor, nil
}

// A WholeReader is an Agent whose transcript every import reads whole
// when ReadsWhole says so (Gemini CLI's chat, whose "$set" history records
// are read against every record before them): the import searches the
// file for no record (IsRecord is not called), leaving out by their refs
// the records the session holds.
type WholeReader interface {
	ReadsWhole() bool
}

// readsWhole reports whether a is a WholeReader that reads whole.
func readsWhole(a Agent) bool {
	w, ok := a.(WholeReader)
	return ok && w.ReadsWhole()
}

// decode reads the transcript's records from offset from to its end,
// every conversation into the session of target, files under dir named
// relative to it. A read from the middle
// of the file in which no record is of a kind the format knows (only
// new record types) stores nothing and is no error; a line error names the
// line of the whole file.
func (t *TranscriptFile) decode(a Agent, from int64, dir string, target transcript.Target) ([]transcript.Session, transcript.Report, error) {
	opts := transcript.Options{
		File: t.path, MainSession: true, Dir: dir,
		Target: func(string) (transcript.Target, error) { return target, nil },
	}
	r := io.NewSectionReader(t.f, from, t.end-from)
	ss, rep, err := transcript.Read(a.Format(), r, opts)
	if errors.Is(err, transcript.ErrNothingRecognized) && from > 0 {
		return nil, rep, nil
	}
	var le *transcript.LineError
	if errors.As(err, &le) && from > 0 {
		n, lerr := t.linesBefore(from)
		if lerr != nil {
			return nil, rep, errors.CombineErrors(err, lerr)
		}
		le.Line += n
	}
	return ss, rep, err
}

// linesBefore counts the lines before offset off.
func (t *TranscriptFile) linesBefore(off int64) (int, error) {
	buf := make([]byte, 64<<10)
	n := 0
	for at := int64(0); at < off; {
		b := buf[:min(int64(len(buf)), off-at)]
		if _, err := t.f.ReadAt(b, at); err != nil {
			return 0, errors.Wrapf(err, "companion: reading transcript %s", t.path)
		}
		n += bytes.Count(b, []byte{'\n'})
		at += int64(len(b))
	}
	return n, nil
}

// linesBeforeOrZero is linesBefore for an error message: 0 when it fails.
func (t *TranscriptFile) linesBeforeOrZero(off int64) int {
	n, _ := t.linesBefore(off)
	return n
}
