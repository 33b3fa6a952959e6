package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

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
	summarizer string
	drop       string
	retries    int
	repair     bool
	timeout    time.Duration
	noSync     bool
	files      []string

	// --summarizer openai: the model, its endpoint and how patiently to
	// ask it. llmSet says whether any of these flags was given.
	model, baseURL, apiKeyEnv string
	llmTimeout                time.Duration
	llmRetries                int
	llmSet                    bool

	sum compaction.Summarizer // set by validate
}

// newReplayCommand returns `strata replay`.
func newReplayCommand() *cobra.Command {
	o := &replayOptions{}
	cmd := &cobra.Command{
		Use:   "replay --db DB [flags] FILE...",
		Short: "Append the events of JSONL files to a database, compacting as it goes",
		Long: `Append the events of each JSONL file (shared/spec/events.md; "-" reads stdin)
to the database, creating it if missing, and compact as it goes: an L1 node
every --every turns or as soon as the uncompacted tail holds --every-events
events, and a depth d+1 node whenever --fold consecutive roots of depth d have
accumulated.

Each compaction prints one line:
  compacted session=S depth=D seq=A..B node=N marker=M [invalidated_markers=..] [invalidated_checkpoints=..] [repaired=A missed=class:item,...]
  refused session=S depth=D seq=A..B checkpoint=C reasons=class:item,...
A refused compaction is normal operation: replay goes on. A closing line
sums up: replayed files=F events=E sessions=S compacted=C refused=R, and with
--repair repaired=P (of the C compacted).

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
answers. The store validates every summary the model returns: one that drops
or invents a claim is refused like any other. An answer that cannot be read
as a summary (not JSON, no narrative, over the budget) after the retries, or
a 401/400, stops the replay with exit status 1.

Bad input stops the replay with exit status 1, naming the file and line; the
events before that line stay stored.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("replay needs at least one FILE (\"-\" for stdin)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.files = args
			for _, name := range []string{"model", "base-url", "api-key-env", "llm-timeout", "llm-retries"} {
				o.llmSet = o.llmSet || cmd.Flags().Changed(name)
			}
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.db, "db", "", "the database file or postgres:// URL (required; created if missing)")
	f.StringVar(&o.session, "session", "", `session of events before the file names one in a "session" field`)
	o.policyFlags.add(f)
	f.StringVar(&o.summarizer, "summarizer", "extractive", "the summarizer: extractive (carries every required claim), lossy (drops --drop), or openai (a model: --model, --base-url)")
	f.StringVar(&o.model, "model", "", "--summarizer openai: the model name, e.g. gpt-4o-mini or llama3.1:8b")
	f.StringVar(&o.baseURL, "base-url", "", "--summarizer openai: the API base URL, e.g. https://api.openai.com/v1 or http://localhost:11434/v1")
	f.StringVar(&o.apiKeyEnv, "api-key-env", "", "--summarizer openai: the environment variable holding the API key (default "+openai.EnvAPIKey+", then "+openai.EnvOpenAIAPIKey+")")
	f.DurationVar(&o.llmTimeout, "llm-timeout", openai.DefaultTimeout, "--summarizer openai: the time limit of each request")
	f.IntVar(&o.llmRetries, "llm-retries", 3, "--summarizer openai: send a request again up to N times after a 429, 5xx, timeout, connection error or unusable answer")
	f.StringVar(&o.drop, "drop", compaction.DropNegatives+","+compaction.DropArtifacts,
		"claim classes the lossy summarizer drops: a comma list of "+strings.Join(compaction.DropClasses, ", "))
	f.IntVar(&o.retries, "retries", 0, "ask the summarizer again, told what was missing, up to R times after a refusal")
	f.BoolVar(&o.repair, "repair", false, "after the last refused retry, commit the summarizer's narrative with the claims computed from the raw span (the refusal stays in the audit)")
	f.BoolVar(&o.noSync, "no-sync", false, "skip fsync on commit: faster bulk loads, but UNSAFE — a crash can lose or damage the database")
	addTimeoutFlag(cmd, &o.timeout)
	return cmd
}

// validate checks the flags and builds the summarizer; its errors are bad
// usage.
func (o *replayOptions) validate() error {
	if o.db == "" {
		return usagef("--db is required")
	}
	if err := o.policyFlags.validate(); err != nil {
		return err
	}
	if o.retries < 0 {
		return usagef("--retries must be 0 or more, got %d", o.retries)
	}
	if o.session != "" {
		if err := store.CheckSession(o.session); err != nil {
			return &usageError{err: errors.Wrap(err, "--session")}
		}
	}
	if err := checkTimeout(o.timeout); err != nil {
		return err
	}
	drop := strings.Split(o.drop, ",")
	if _, err := compaction.NewLossy(drop...); err != nil { // checks the list whatever the summarizer
		return &usageError{err: errors.Wrap(err, "--drop")}
	}
	if o.summarizer == "openai" {
		return o.validateOpenAI()
	}
	if o.llmSet {
		return usagef("--model, --base-url, --api-key-env, --llm-timeout and --llm-retries apply only to --summarizer openai")
	}
	sum, err := compaction.New(o.summarizer, drop)
	if err != nil {
		return &usageError{err: errors.Wrap(err, "--summarizer")}
	}
	o.sum = sum
	return nil
}

// validateOpenAI checks the --summarizer openai flags and builds the
// summarizer: a missing --model or --base-url, a bad value or a key
// variable that is unset is bad usage.
func (o *replayOptions) validateOpenAI() error {
	if o.model == "" || o.baseURL == "" {
		return &usageError{err: errors.WithHint(errors.New("--summarizer openai needs --model and --base-url"),
			"e.g. --model llama3.1:8b --base-url http://localhost:11434/v1 (Ollama)")}
	}
	if o.llmTimeout <= 0 {
		return usagef("--llm-timeout must be positive, got %s", o.llmTimeout)
	}
	if o.llmRetries < 0 || o.llmRetries > openai.MaxRetries {
		return usagef("--llm-retries must be 0..%d, got %d", openai.MaxRetries, o.llmRetries)
	}
	sum, err := openai.New(openai.Config{BaseURL: o.baseURL, Model: o.model, APIKeyEnv: o.apiKeyEnv,
		Timeout: o.llmTimeout, Retries: o.llmRetries})
	if err != nil {
		return &usageError{err: errors.Wrap(err, "--summarizer openai")}
	}
	o.sum = sum
	return nil
}

// run replays the files into the database, creating it if missing, and
// prints the closing summary whatever happens once it is open.
func (o *replayOptions) run(ctx context.Context, stdin io.Reader, out, errOut io.Writer) (err error) {
	db, err := store.Open(o.db, store.Options{Create: true, LockTimeout: o.timeout, NoSync: o.noSync})
	if err != nil {
		return explainOpen(err)
	}
	defer closeDB(db, &err)
	comp, err := compaction.NewCompactor(db, compaction.Options{
		Summarizer: o.sum,
		Policy:     o.policy(),
		Retries:    o.retries,
		Repair:     o.repair,
	})
	if err != nil {
		return err
	}
	r := &replayer{out: out, defaultSession: o.session, sessions: map[string]bool{}}
	r.prog = newProgress(errOut, "replay", "bytes", inputSize(o.files, stdin))
	// Compactions run on a goroutine of their own while the next events
	// are read and appended; their commits share the appends' fsyncs.
	r.bg = comp.Background(ctx, r.reportRun)
	defer func() {
		// A compaction's error comes first: it was met on events read
		// before anything that stopped the appending.
		if cerr := r.bg.Close(); cerr != nil {
			err = cerr
		}
		r.prog.finish()
		repaired := ""
		if o.repair {
			repaired = fmt.Sprintf(" repaired=%d", r.repaired)
		}
		fmt.Fprintf(out, "replayed files=%d events=%d sessions=%d compacted=%d refused=%d%s\n",
			r.files, r.events, len(r.sessions), r.compacted, r.refused, repaired)
	}()
	for _, name := range o.files {
		if err := r.replayFile(name, stdin); err != nil {
			return err
		}
	}
	return nil
}

// replayer appends the events of JSONL files and compacts after each
// append (in the background), counting what it did.
type replayer struct {
	bg             *compaction.Background
	out            io.Writer
	defaultSession string
	prog           *progress // on a terminal: bytes read, events stored

	files, events int
	sessions      map[string]bool
	// Counted by reportRun, on bg's goroutine; repaired ones are also
	// compacted.
	compacted, refused, repaired int

	// The pending batch: consecutive lines of one session of file.
	file    string
	session string
	batch   []tier.Event
	lines   []int
}

// replayFile appends the events of the file called name ("-": stdin).
func (r *replayer) replayFile(name string, stdin io.Reader) error {
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
	in = r.prog.reader(in)
	r.file = label
	r.files++
	last := "" // the session the file named last: it goes on where a line names none
	rd := tier.NewReader(in, label, tier.Limits{})
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
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
		if bad != nil {
			if ferr := r.flush(); ferr != nil {
				return ferr
			}
			return &tier.LineError{File: label, Line: rec.Line, Err: bad}
		}
		if session != r.session || len(r.batch) >= replayBatch {
			if err := r.flush(); err != nil {
				return err
			}
			r.session = session
		}
		r.batch = append(r.batch, rec.Event)
		r.lines = append(r.lines, rec.Line)
	}
	return r.flush()
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

// stored counts n events appended to the batch's session.
func (r *replayer) stored(n int) {
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
	var b strings.Builder
	if x.Committed() {
		r.compacted++
		fmt.Fprintf(&b, "compacted session=%s depth=%d seq=%d..%d node=%d marker=%d",
			fieldValue(x.Session), x.Depth, x.From, x.To, x.Node, x.Marker)
		if len(x.InvalidatedMarkers) > 0 {
			b.WriteString(" invalidated_markers=" + joinIDs(x.InvalidatedMarkers))
		}
		if len(x.InvalidatedCheckpoints) > 0 {
			b.WriteString(" invalidated_checkpoints=" + joinIDs(x.InvalidatedCheckpoints))
		}
		if x.Repaired != 0 {
			r.repaired++
			missed := &marker.InvalidError{Failures: x.Missed}
			fmt.Fprintf(&b, " repaired=%d missed=%s", x.Repaired, missed.Reasons())
		}
	} else {
		r.refused++
		reasons := ""
		if x.Refused != nil {
			reasons = x.Refused.Reasons()
		}
		fmt.Fprintf(&b, "refused session=%s depth=%d seq=%d..%d checkpoint=%d reasons=%s",
			fieldValue(x.Session), x.Depth, x.From, x.To, x.Checkpoint, reasons)
	}
	b.WriteByte('\n')
	r.prog.above(func() { io.WriteString(r.out, b.String()) })
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
