package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata/backend/boltfile"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/compaction/openai"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// errNoSession is the cause of a line that names no session when --session
// is not set either.
var errNoSession = errors.New("strata: event has no session")

// replayBatch caps the events of one Append call: appends go to the store
// in runs of consecutive lines of one session, so that a bad line leaves
// exactly the lines before it stored.
const replayBatch = 256

// replayOptions are the flags and arguments of `strata replay`.
type replayOptions struct {
	db      string
	session string
	policyFlags
	summarizerFlags
	timeout time.Duration
	noSync  bool
	json    bool
	files   []string

	compactHint string // what to run when events were stored, not compacted
}

// newReplayCommand returns `strata replay`.
func newReplayCommand() *cobra.Command {
	o := &replayOptions{}
	cmd := &cobra.Command{
		Use:   "replay DB [--window N] [--share F] [--every-tokens N] [--every N] [--every-events M] [--fold K] [--max-roots R] [--summarizer extractive|lossy|openai] [--retries R] [--repair] [--json] FILE...",
		Short: "Append the events of JSONL files to a database, compacting as it goes",
		Long: `Append the events of each JSONL file (the format of docs/events.md; "-"
reads stdin) to the database, creating it if missing, and compact as it goes,
keeping a resumed context within --share of the model's --window (default
` + strconv.Itoa(compaction.DefaultWindow) + ` tokens, ` + strconv.FormatFloat(compaction.DefaultShare, 'g', -1, 64) + `): at most --max-roots summaries of --budget tokens,
and an L1 node as soon as the raw tail reaches what they leave (by default
` + strconv.Itoa(compaction.DefaultEveryTokens) + ` tokens; the tail as a resumed context would carry it, 4 bytes a
token); a depth d+1 node whenever --fold consecutive roots of depth d have
accumulated. By hand instead: an L1 node as soon as the tail reaches
--every-tokens tokens, every --every turns, or as soon as it holds
--every-events events — whichever boundary comes first. A boundary by size or
by events may fall mid-turn: the node claims the calls then open UNRESOLVED.
After a refused span, each rule waits for its next boundary past it, and the
next attempt covers the longer span.

Each compaction prints one line:
  compacted session=S depth=D seq=A..B node=N marker=M [invalidated_markers=..] [invalidated_checkpoints=..] [repaired=A missed=class:item,...]
  refused session=S depth=D seq=A..B checkpoint=C reasons=class:item,...
A refused compaction is normal operation: replay goes on. A closing line
sums up: replayed files=F events=E sessions=S compacted=C refused=R, and with
--repair repaired=P (of the C compacted).

--json prints the same as JSON lines: {"type":"compacted", "session",
"depth", "from", "to", "node", "marker", "invalidated_markers",
"invalidated_checkpoints", "repaired", "missed"}, {"type":"refused",
"session", "depth", "from", "to", "checkpoint", "reasons", "failures"}, and
last {"type":"replayed", "files", "events", "sessions", "compacted",
"refused", "repaired"}.

The database is the first argument, or --db DB: with --db, every argument
is a FILE.

--retries R asks the summarizer again, told what its summary lacked, up to R
times. --repair then commits a summary still refused after the retries with
the summarizer's narrative and the claims computed from the raw span —
validated as usual — instead of leaving the span to resume from raw: the
line says repaired=A (the audit id of the refused attempt it repairs) and
missed= what the summarizer lacked; the refused attempts stay in the audit.

The session of an event is its line's "session" field; where absent, the
session the file named last, or else --session.

--summarizer openai asks a model behind any OpenAI-compatible endpoint
(OpenAI, Ollama, vLLM, llama.cpp server): POST --base-url/chat/completions
with --model. The API key is read from the environment variable
--api-key-env names, else STRATA_API_KEY, else OPENAI_API_KEY; local servers
need none. Each request is bounded by --llm-timeout and retried up to
--llm-retries times on 429, 5xx, timeouts, connection errors and unusable
answers; each retry is reported on stderr with the failure and the wait.
The store validates every summary the model returns: one that drops or
invents a claim is refused like any other. An answer that cannot be read as a
summary (not JSON, no narrative, over the budget), still so after the
retries, is a refusal too, of class output (reasons=output:invalid_json …),
and replay goes on. A 401/400, or a server still failing after the retries,
stops the replay with exit status 1.

Ctrl-C (or SIGTERM) stops the replay: the events read so far are stored, the
closing line counts them, and the exit status is 130 (143 after SIGTERM).

Bad input stops the replay with exit status 1, naming the file and line; the
events before that line stay stored. A database replay created and stored
nothing in (a missing file, bad input on the first line) is removed.`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case o.db != "" && len(args) == 0:
				return usagef("replay needs at least one FILE (\"-\" for stdin)")
			case o.db == "" && len(args) == 0:
				return usagef("replay needs a database and at least one FILE: strata replay DB FILE... (or --db DB FILE...)")
			case o.db == "" && args[0] == "-":
				return usagef("replay's first argument is the database, which cannot be stdin: strata replay DB - (or --db DB -)")
			case o.db == "" && len(args) == 1:
				return usagef("replay needs at least one FILE after the database %s (\"-\" for stdin)", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			db, files, err := dbArg(cmd, o.db, args)
			if err != nil {
				return err
			}
			o.db, o.files = db, files
			o.summarizerFlags.changed(cmd.Flags())
			if err := o.validate(); err != nil {
				return err
			}
			o.compactHint = compactHint(cmd, o.db)
			return o.run(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.db, "db", "", "the database file or postgres:// URL (created if missing; its directory must exist): then every argument is a FILE")
	f.StringVar(&o.session, "session", "", `session of events before the file names one in a "session" field`)
	o.policyFlags.add(f)
	o.summarizerFlags.add(f)
	f.BoolVar(&o.noSync, "no-sync", false, "skip fsync on commit: faster bulk loads, but UNSAFE — a crash can lose or damage the database")
	addJSONFlag(cmd, &o.json, "JSON lines: one object per compaction, then the summary")
	addTimeoutFlag(cmd, &o.timeout)
	return cmd
}

// validate checks the flags and builds the summarizer; its errors are bad
// usage.
func (o *replayOptions) validate() error {
	for _, name := range o.files {
		if name == "-" {
			continue
		}
		if fi, err := os.Stat(name); err == nil && fi.Mode().IsRegular() && boltfile.IsBoltFile(name) {
			return &usageError{err: errors.WithHintf(errors.Newf("replay: %s is a database, not a file of events", name),
				"give the database once: strata replay DB FILE..., or strata replay --db DB FILE... (with --db, every argument is a FILE)")}
		}
	}
	if err := o.policyFlags.validate(); err != nil {
		return err
	}
	if o.session != "" {
		if err := store.CheckSession(o.session); err != nil {
			return &usageError{err: errors.Wrap(err, "--session")}
		}
	}
	if err := checkTimeout(o.timeout); err != nil {
		return err
	}
	return o.summarizerFlags.validate()
}

// run replays the files into the database, creating it if missing, and
// prints the closing summary whatever happens once it is open.
func (o *replayOptions) run(ctx context.Context, stdin io.Reader, out, errOut io.Writer) (err error) {
	db, fresh, err := openToWrite(o.db, store.Options{LockTimeout: o.timeout, NoSync: o.noSync})
	if err != nil {
		return err
	}
	defer closeWritten(db, fresh, &err) // a failed replay leaves no new empty database
	comp, err := compaction.NewCompactor(db, o.options(o.policy()))
	if err != nil {
		return err
	}
	r := newReplayer(ctx, db, out, o.json)
	r.defaultSession = o.session
	r.prog = newProgress(errOut, "replay", "bytes", inputSize(o.files, stdin))
	o.command, o.prog, o.errOut = "replay", r.prog, errOut
	stdin = newContextReader(ctx, stdin) // Ctrl-C ends a read blocked on a pipe
	// Compactions run on a goroutine of their own while the next events
	// are read and appended; their commits share the appends' fsyncs.
	r.bg = comp.Background(ctx, r.reportRun)
	defer func() {
		// A compaction's error comes first: it was met on events read
		// before anything that stopped the appending.
		if cerr := r.bg.Close(); cerr != nil {
			err = cerr
			if r.events > 0 && ctx.Err() == nil {
				// Stored, not compacted: compact goes on from there.
				err = errors.WithHint(err, o.compactHint)
			}
		}
		if errors.Is(err, openai.ErrTimeout) {
			err = errors.WithHint(err, "give the model more time per request with --llm-timeout")
		}
		r.prog.finish()
		r.summary(o.repair)
	}()
	for _, name := range o.files {
		if err := r.replayFile(name, stdin); err != nil {
			return err
		}
	}
	return nil
}

// replayer appends the events of JSONL files and compacts after each
// append (in the background), counting what it did. An event a session
// holds already — by its seq (docs/events.md) — is checked against the
// stored one and left out, so that a file replayed again adds nothing.
type replayer struct {
	ctx            context.Context // its end (Ctrl-C) stops the replay before the next append
	db             *store.DB
	bg             *compaction.Background
	out            io.Writer
	json           bool // JSON lines instead of text
	defaultSession string
	prog           *progress // on a terminal: bytes read, events stored

	files, events int
	known         int // events left out: the session held them already
	sessions      map[string]bool
	// Counted by reportRun, on bg's goroutine; repaired ones are also
	// compacted.
	compacted, refused, repaired int

	// pos is the seq of the last line read of each session; heads the
	// seq of each session's last stored event; window stored events read
	// ahead for comparison.
	pos    map[string]uint64
	heads  map[string]uint64
	window map[string][]tier.Event

	// The pending batch: consecutive lines of one session of file.
	file    string
	session string
	batch   []tier.Event
	lines   []int
}

// newReplayer returns a replayer into db, printing to out.
func newReplayer(ctx context.Context, db *store.DB, out io.Writer, asJSON bool) *replayer {
	return &replayer{ctx: ctx, db: db, out: out, json: asJSON, sessions: map[string]bool{},
		pos: map[string]uint64{}, heads: map[string]uint64{}, window: map[string][]tier.Event{}}
}

// replayCheckWindow is how many stored events one read fetches to compare
// the lines of a file replayed again with.
const replayCheckWindow = 256

// replayFile appends the events of the file called name ("-": stdin)
// that their sessions do not hold. A file is read twice: first to compare
// every line its sessions hold already with the stored event, so that a
// file that differs from what is stored is refused before anything of it
// is stored; stdin is compared as it is read.
func (r *replayer) replayFile(name string, stdin io.Reader) error {
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return errors.Wrap(err, "replay")
		}
		err = r.readFile(f, name, true, false)
		f.Close()
		if err != nil {
			return err
		}
	}
	var in io.Reader = stdin
	label := "stdin"
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return errors.Wrap(err, "replay")
		}
		defer f.Close()
		in, label = f, name
	}
	r.files++
	return r.readFile(r.prog.reader(in), label, false, name == "-")
}

// readFile reads the events of in, the file called label. With check it
// only compares the lines their sessions hold with the stored events and
// returns the first that differs: a line that is bad input is left for
// the appending read to report. Without, it appends the lines the
// sessions do not hold; pipe says in may wait for its next line (stdin),
// so that what arrived is stored first.
func (r *replayer) readFile(in io.Reader, label string, check, pipe bool) error {
	pos := r.pos
	if check {
		pos = maps.Clone(r.pos)
	} else {
		r.file = label
	}
	last := "" // the session the file named last: it goes on where a line names none
	rd := tier.NewReader(in, label, tier.Limits{})
	for {
		if err := r.ctx.Err(); err != nil {
			if check {
				return err
			}
			// Interrupted: what was read is stored, and the closing
			// line counts it.
			if ferr := r.flush(); ferr != nil {
				return ferr
			}
			return err
		}
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if check {
				return nil
			}
			// What was read before the bad line is stored; an error in it
			// comes first in the file.
			if ferr := r.flush(); ferr != nil {
				return ferr
			}
			return err
		}
		session := rec.Session
		switch {
		case session != "":
			last = session
		case last != "":
			session = last
		default:
			session = r.defaultSession
		}
		var bad error
		if session == "" {
			bad = errors.WithHint(errNoSession, `give the line a "session" field, or pass --session`)
		} else if err := store.CheckSession(session); err != nil {
			bad = err
		}
		var known bool
		if bad == nil {
			known, bad = r.place(pos, session, &rec.Event)
		}
		if bad != nil {
			if check {
				if errors.Is(bad, tier.ErrStoredDiffers) {
					return &tier.LineError{File: label, Line: rec.Line, Err: bad}
				}
				return nil
			}
			if ferr := r.flush(); ferr != nil {
				return ferr
			}
			return &tier.LineError{File: label, Line: rec.Line, Err: bad}
		}
		if check {
			continue
		}
		if known {
			r.known++
			r.sessions[session] = true
			continue
		}
		// A batch may end only between two source records: the events of
		// one ref are appended together (store.Append).
		full := len(r.batch) >= replayBatch && (rec.Event.Ref == "" || rec.Event.Ref != r.batch[len(r.batch)-1].Ref)
		if session != r.session || full {
			if err := r.flush(); err != nil {
				return err
			}
			r.session = session
		}
		r.batch = append(r.batch, rec.Event)
		r.lines = append(r.lines, rec.Line)
		if pipe && rd.Buffered() == 0 {
			// The next read may wait on a pipe: store what arrived.
			if err := r.flush(); err != nil {
				return err
			}
		}
	}
	if check {
		return nil
	}
	return r.flush()
}

// place gives e its seq in session — its "seq", else one past the
// session's line before it in pos (1 for its first) — and reports whether
// the session holds that seq already; then e must be the event stored
// there, else the error is tier.ErrStoredDiffers naming the first field
// that differs.
func (r *replayer) place(pos map[string]uint64, session string, e *tier.Event) (known bool, err error) {
	prev := pos[session]
	switch {
	case e.Seq == 0:
		e.Seq = prev + 1
	case e.Seq <= prev:
		return false, &tier.EventError{Seq: e.Seq, Kind: e.Kind.String(), ID: e.ID, Key: e.Key, Err: tier.ErrSeqOrder,
			Detail: fmt.Sprintf("session %q had seq %d on a line before", session, prev)}
	}
	pos[session] = e.Seq
	head, err := r.head(session)
	if err != nil || e.Seq > head {
		return false, err
	}
	stored, err := r.storedEvent(session, e.Seq, head)
	if err != nil {
		return false, err
	}
	if f := e.Mismatch(&stored); f != "" {
		return false, errors.WithHint(&tier.EventError{Seq: e.Seq, Kind: e.Kind.String(), ID: e.ID, Key: e.Key, Err: tier.ErrStoredDiffers,
			Detail: fmt.Sprintf("session %q holds seq %d (kind %s) with another %s; nothing of the file is stored", session, e.Seq, stored.Kind, f)},
			`replay adds to a session only the events it does not hold: a session's lines are its events from seq 1 on (or at their "seq"); replay the file into another database, or another session (--session, or its lines' "session")`)
	}
	return true, nil
}

// head returns the seq of session's last stored event: 0 for a session the
// database does not hold.
func (r *replayer) head(session string) (uint64, error) {
	if h, ok := r.heads[session]; ok {
		return h, nil
	}
	info, err := r.db.Info(session)
	if errors.Is(err, store.ErrSessionNotFound) {
		info.Head, err = 0, nil
	}
	if err != nil {
		return 0, err
	}
	r.heads[session] = info.Head
	return info.Head, nil
}

// storedEvent returns the event session holds at seq (at most head),
// reading up to replayCheckWindow of them ahead.
func (r *replayer) storedEvent(session string, seq, head uint64) (tier.Event, error) {
	w := r.window[session]
	if len(w) > 0 && seq >= w[0].Seq && seq-w[0].Seq < uint64(len(w)) {
		return w[seq-w[0].Seq], nil
	}
	w = w[:0]
	err := r.db.View(func(s *store.Snapshot) error {
		return s.Events(session, seq, min(head, seq+replayCheckWindow-1), func(e tier.Event) error {
			w = append(w, e)
			return nil
		})
	})
	if err != nil {
		return tier.Event{}, err
	}
	if len(w) == 0 || w[0].Seq != seq {
		return tier.Event{}, errors.Newf("replay: session %q: no stored event at seq %d", session, seq)
	}
	r.window[session] = w
	return w[0], nil
}

// flush appends the pending batch and queues the compaction of its
// session. When the store refuses an event of the batch, the events before
// it are appended, and the error names the event's line.
func (r *replayer) flush() error {
	if len(r.batch) == 0 {
		return nil
	}
	defer func() { r.batch, r.lines = r.batch[:0], r.lines[:0] }()
	_, err := r.bg.Append(r.session, r.batch...)
	var ee *tier.EventError
	switch {
	case errors.Is(err, compaction.ErrStopped):
		return err // Close returns it
	case errors.As(err, &ee) && ee.Index >= 0 && ee.Index < len(r.batch):
		if ee.Index > 0 {
			if _, err := r.bg.Append(r.session, r.batch[:ee.Index]...); err != nil {
				return err
			}
			r.stored(ee.Index)
		}
		return &tier.LineError{File: r.file, Line: r.lines[ee.Index], Err: err}
	case err != nil:
		return errors.Wrapf(err, "%s:%d", r.file, r.lines[0])
	}
	r.stored(len(r.batch))
	return nil
}

// stored counts n events appended to the batch's session, the first n of
// the batch.
func (r *replayer) stored(n int) {
	if n > 0 && r.heads != nil {
		r.heads[r.session] = r.batch[n-1].Seq
	}
	r.events += n
	r.sessions[r.session] = true
	r.prog.addEvents(int64(n))
}

// reportRun reports the compactions of one Run of the compactor. A Run
// compacts as far as is due, so the compactions are exactly those of a
// replay that compacted after every event.
func (r *replayer) reportRun(_ string, rs []compaction.Result) {
	for i := range rs {
		r.report(&rs[i])
	}
}

// report prints one line per compaction.
func (r *replayer) report(x *compaction.Result) {
	line := ""
	if x.Committed() {
		r.compacted++
		if x.Repaired != 0 {
			r.repaired++
		}
		line = compactedLine(x, r.json)
	} else {
		r.refused++
		line = refusedLine(x, r.json)
	}
	r.prog.above(func() { io.WriteString(r.out, line) })
}

// The lines of `replay --json`, told apart by "type".
type (
	// compactedJSON is a committed compaction.
	compactedJSON struct {
		Type                   string           `json:"type"` // "compacted"
		Session                string           `json:"session"`
		Depth                  int              `json:"depth"`
		From                   uint64           `json:"from"`
		To                     uint64           `json:"to"`
		Node                   uint64           `json:"node"`
		Marker                 uint64           `json:"marker"`
		InvalidatedMarkers     []uint64         `json:"invalidated_markers"`
		InvalidatedCheckpoints []uint64         `json:"invalidated_checkpoints"`
		Repaired               uint64           `json:"repaired"` // the audit id of the refusal repaired; 0 for none
		Missed                 []marker.Failure `json:"missed"`
	}
	// refusedJSON is a refused compaction.
	refusedJSON struct {
		Type       string           `json:"type"` // "refused"
		Session    string           `json:"session"`
		Depth      int              `json:"depth"`
		From       uint64           `json:"from"`
		To         uint64           `json:"to"`
		Checkpoint uint64           `json:"checkpoint"`
		Reasons    string           `json:"reasons"`
		Failures   []marker.Failure `json:"failures"`
	}
	// replayedJSON is the closing summary.
	replayedJSON struct {
		Type      string `json:"type"` // "replayed"
		Files     int    `json:"files"`
		Events    int    `json:"events"`
		Sessions  int    `json:"sessions"`
		Compacted int    `json:"compacted"`
		Refused   int    `json:"refused"`
		Repaired  *int   `json:"repaired,omitempty"` // with --repair
		Known     int    `json:"known"`              // events left out: their sessions held them
	}
)

// jsonLine returns v, a line type above, as one JSON line.
func jsonLine(v any) string {
	var b strings.Builder
	_ = writeJSONLine(&b, v) // the line types always encode
	return b.String()
}

// compactedLine returns the line of a committed compaction.
func compactedLine(x *compaction.Result, asJSON bool) string {
	if asJSON {
		return jsonLine(compactedJSON{Type: "compacted", Session: x.Session, Depth: int(x.Depth), From: x.From, To: x.To,
			Node: x.Node, Marker: x.Marker, InvalidatedMarkers: nonNil(x.InvalidatedMarkers),
			InvalidatedCheckpoints: nonNil(x.InvalidatedCheckpoints), Repaired: x.Repaired, Missed: nonNil(x.Missed)})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "compacted session=%s depth=%d seq=%d..%d node=%d marker=%d",
		fieldValue(x.Session), x.Depth, x.From, x.To, x.Node, x.Marker)
	if len(x.InvalidatedMarkers) > 0 {
		b.WriteString(" invalidated_markers=" + joinIDs(x.InvalidatedMarkers))
	}
	if len(x.InvalidatedCheckpoints) > 0 {
		b.WriteString(" invalidated_checkpoints=" + joinIDs(x.InvalidatedCheckpoints))
	}
	if x.Repaired != 0 {
		missed := &marker.InvalidError{Failures: x.Missed}
		fmt.Fprintf(&b, " repaired=%d missed=%s", x.Repaired, missed.Reasons())
	}
	b.WriteByte('\n')
	return b.String()
}

// refusedLine returns the line of a refused compaction.
func refusedLine(x *compaction.Result, asJSON bool) string {
	reasons := ""
	var failures []marker.Failure
	if x.Refused != nil {
		reasons, failures = x.Refused.Reasons(), x.Refused.Failures
	}
	if asJSON {
		return jsonLine(refusedJSON{Type: "refused", Session: x.Session, Depth: int(x.Depth), From: x.From, To: x.To,
			Checkpoint: x.Checkpoint, Reasons: reasons, Failures: nonNil(failures)})
	}
	return fmt.Sprintf("refused session=%s depth=%d seq=%d..%d checkpoint=%d reasons=%s\n",
		fieldValue(x.Session), x.Depth, x.From, x.To, x.Checkpoint, reasons)
}

// summary prints the closing line; with repair, how many were repaired.
func (r *replayer) summary(repair bool) {
	if r.json {
		s := replayedJSON{Type: "replayed", Files: r.files, Events: r.events, Sessions: len(r.sessions), Compacted: r.compacted, Refused: r.refused, Known: r.known}
		if repair {
			s.Repaired = &r.repaired
		}
		io.WriteString(r.out, jsonLine(s))
		return
	}
	repaired := ""
	if repair {
		repaired = fmt.Sprintf(" repaired=%d", r.repaired)
	}
	known := ""
	if r.known > 0 {
		known = fmt.Sprintf(" known=%d", r.known)
	}
	fmt.Fprintf(r.out, "replayed files=%d events=%d sessions=%d compacted=%d refused=%d%s%s\n",
		r.files, r.events, len(r.sessions), r.compacted, r.refused, repaired, known)
}

// nonNil returns s, or an empty slice for nil: JSON lists are never null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// joinIDs returns ids as "3,4".
func joinIDs(ids []uint64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatUint(id, 10)
	}
	return strings.Join(parts, ",")
}

// fieldValue returns s as a key=value field value: as is, or quoted when it
// holds a space, a quote or an equals sign that would break the line apart.
func fieldValue(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\"=") {
		return strconv.Quote(s)
	}
	return s
}
