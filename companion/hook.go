package companion

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// boundaryBlock is how many events a hook reads at a time, walking back
// from the head for the event of the agent's newest record of a
// compaction.
const boundaryBlock = 64

// Options configure a Hook. The zero value injects DefaultBudget tokens
// and names the store "DB" in the command it gives.
type Options struct {
	// Budget is the token budget of the injected state (State.Render); 0
	// means DefaultBudget, and a budget under MinBudget is MinBudget.
	Budget int
	// DB names the store in the `strata resume` command the injected
	// state gives, as the user would type it (a path or a URL); "" means
	// "DB".
	DB string
}

// Hook runs an agent's hook events against a store: the hook's
// compactions are the extractive summarizer's (valid by construction),
// one L1 node per compaction of the agent's, folded four roots at a time
// (compaction.DefaultFold) into nodes of DefaultBudget tokens.
type Hook struct {
	db    *store.DB
	agent Agent
	comp  *compaction.Compactor
	opts  Options
}

// New returns a Hook of agent a over db.
func New(db *store.DB, a Agent, opts Options) (*Hook, error) {
	comp, err := compaction.NewCompactor(db, compaction.Options{Summarizer: compaction.Extractive{},
		Policy: compaction.Policy{Fold: compaction.DefaultFold, Budget: compaction.DefaultBudget}})
	if err != nil {
		return nil, err
	}
	if opts.DB == "" {
		opts.DB = "DB"
	}
	return &Hook{db: db, agent: a, comp: comp, opts: opts}, nil
}

// Result is what one hook run did.
type Result struct {
	Input   Input
	Agent   Agent
	Ignored bool // an event or source the hook does not act on: nothing was done
	Import  Import
	// Compactions are those the run made: at ActionCompact the span to
	// the head and the folds it made due; at an injection the span to the
	// boundary when no compaction had reached it.
	Compactions []compaction.Result
	// The state injected, as rendered, and the check of the agent's
	// summary (nil when there is no summary to check).
	State    *State
	Rendered Rendered
	Check    *Check
	// Unwritten says that the transcript did not hold the agent's record
	// of the compaction yet: the boundary is the head ActionCompact
	// compacted.
	Unwritten bool
	// NoBoundary says that the hook found no compaction boundary — no
	// record of one in the transcript, and no compaction of the hook's
	// in the store: what it imported stays stored (as the next
	// compaction's hook would store it), nothing is checked or injected.
	NoBoundary bool
	// Injected says that an ActionInjectOnce found the state at the
	// boundary injected already: nothing is injected again.
	Injected bool
	// Output is what the hook prints on stdout: the agent's JSON adding
	// the state to its context after an injection, nil otherwise.
	Output []byte
}

// Run handles one hook event by its action (Agent.Action, which sets
// in.Action): ActionCompact imports the transcript and compacts the
// session's head, so that a marker stands where the agent is about to
// cut; ActionCheck checks the agent's summary; ActionInject imports what
// the agent wrote since and returns, as Result.Output, the state at the
// boundary to add to the context. An ignored event's transcript is not
// opened. A failure is an error naming what failed; the CLI logs it and
// exits 0. Files under the input's cwd are named relative to it in the
// events' keys, for every agent (ImportTranscript). Run is
// Input.OpenTranscript and RunTranscript.
func (h *Hook) Run(ctx context.Context, in Input) (*Result, error) {
	in.Action = h.agent.Action(&in)
	if !in.Handled() {
		return &Result{Input: in, Agent: h.agent, Ignored: true}, nil
	}
	t, err := in.OpenTranscript()
	if err != nil {
		return &Result{Input: in, Agent: h.agent}, err
	}
	defer t.Close()
	return h.RunTranscript(ctx, t)
}

// RunTranscript is Run on the transcript of an input opened already
// (Input.OpenTranscript), which it reads once and leaves open: for a
// caller that opens it before it makes the store, so that a transcript it
// cannot read makes none.
func (h *Hook) RunTranscript(ctx context.Context, t *Transcript) (*Result, error) {
	in := t.in
	in.Action = h.agent.Action(&in)
	r := &Result{Input: in, Agent: h.agent}
	if !in.Handled() {
		r.Ignored = true
		return r, nil
	}
	var at sessionState
	var err error
	if r.Import, at, err = importTranscript(h.db, h.agent, in.SessionID, t.file, ProjectDir("", in.Cwd), false); err != nil {
		return r, errors.Wrapf(err, "importing transcript %s", in.TranscriptPath)
	}
	switch in.Action {
	case ActionCompact:
		// An agent may write a compaction's records after every hook of it
		// ran (Claude Code does): the summary of the one before is checked
		// here when no hook checked it.
		c, err := h.compaction(in.SessionID, at, t.file)
		if err == nil && c.found && c.summary.ref != "" {
			err = h.storeCheck(r, c, at)
		}
		if err != nil {
			return r, err
		}
		return r, h.preCompact(ctx, r, at)
	case ActionCheck:
		return r, h.postCompact(r, at, t.file)
	}
	return r, h.sessionStart(ctx, r, at, t.file)
}

// preCompact compacts the session's head, as the import left it: every
// event imported is about to leave the agent's context. A head that is
// strata's own event — a check or an injection it stored — says that no
// record reached the transcript since the hook before read it: a hook run
// again, not a new compaction, so nothing is compacted (and should the
// agent compact with nothing new, the injection makes the marker at its
// boundary).
func (h *Hook) preCompact(ctx context.Context, r *Result, at sessionState) error {
	if !at.exists || at.ownHead {
		return nil // a transcript with nothing to store yet, or nothing new
	}
	var err error
	r.Compactions, err = h.comp.CompactTo(ctx, r.Input.SessionID, at.head)
	return errors.Wrap(err, "compacting the session")
}

// postCompact checks the agent's summary: from the records, when they
// reached the transcript before the hook ran, else from the input's
// compact_summary against the state at the head the compaction's hook
// compacted (Result.Unwritten). The check is stored once; nothing is
// printed.
func (h *Hook) postCompact(r *Result, at sessionState, t *TranscriptFile) error {
	c, err := h.compaction(r.Input.SessionID, at, t)
	switch {
	case err != nil:
		return err
	case c.found && c.summary.ref != "":
		return h.storeCheck(r, c, at)
	case c.found:
		c.summary = summaryRecord{}
	case at.compactedTo > 0:
		r.Unwritten = true
		c = compactionAt{boundary: at.compactedTo, covered: at.compactedTo}
	default:
		r.NoBoundary = true
		return nil
	}
	if strings.TrimSpace(r.Input.CompactSummary) == "" {
		return nil // nothing to check
	}
	return h.storeCheck(r, c, at)
}

// sessionStart finds the agent's compaction boundary in the store,
// makes sure a marker stands at it, checks the agent's summary against
// the state there when its records are written, stores that check, and
// renders the state as the agent's output. ActionInjectOnce does it once
// per boundary, storing the injection.
func (h *Hook) sessionStart(ctx context.Context, r *Result, at sessionState, t *TranscriptFile) error {
	session := r.Input.SessionID
	c, err := h.compaction(r.Input.SessionID, at, t)
	switch {
	case err != nil:
		return err
	case !c.found && at.compactedTo > 0:
		r.Unwritten = true
		c.boundary = at.compactedTo
	case !c.found:
		r.NoBoundary = true
		return nil
	}
	boundary := c.boundary
	once := r.Input.Action == ActionInjectOnce
	if once {
		if err := h.db.View(func(s *store.Snapshot) error {
			_, done, err := s.Ref(session, injectedRef(boundary))
			r.Injected = done
			return err
		}); err != nil || r.Injected {
			return err
		}
	}
	if boundary > 0 {
		// PreCompact made a marker here, unless it did not run or records
		// before the boundary were written after it ran.
		if r.Compactions, err = h.comp.CompactTo(ctx, session, boundary); err != nil {
			return errors.Wrap(err, "compacting the session to the boundary")
		}
	}
	if c.summary.ref != "" {
		if err := h.storeCheck(r, c, at); err != nil {
			return err
		}
	}
	err = h.db.View(func(s *store.Snapshot) error {
		if r.State, err = computeState(s, session, boundary); err != nil {
			return err
		}
		m, err := markerAt(s, session, boundary)
		if err != nil {
			return err
		}
		rc, err := s.Resume(session, m)
		if err != nil {
			return err
		}
		r.State.Marker, r.State.SHA256 = rc.Marker, rc.SHA256()
		r.State.Bytes, r.State.Events = len(rc.Text()), len(rc.Events)
		if rc.Source != checkpoint.SourceMarker {
			r.State.Marker = 0
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.State.Agent = h.agent.Title()
	r.Rendered = r.State.Render(h.opts.DB, h.opts.Budget)
	if r.Output, err = h.agent.Output(&r.Input, r.Rendered.Text); err != nil {
		return err
	}
	if once {
		text := fmt.Sprintf("strata added the state at seq %d to %s's context (marker %d, sha256 %s, %d facts, %d shown)",
			boundary, h.agent.Title(), r.State.Marker, r.State.SHA256, r.Rendered.Facts, r.Rendered.Shown)
		if err := h.appendOwn(session, injectedRef(boundary), text, 0); err != nil {
			return errors.Wrap(err, "storing the injection")
		}
	}
	return nil
}

// injectedRef is the ref of the event an ActionInjectOnce stores when it
// injected the state at boundary.
func injectedRef(boundary uint64) string {
	return strataRefPrefix + "injected:at:" + strconv.FormatUint(boundary, 10)
}

// summaryRecord is the record of Claude Code's summary in the store: its
// ref and its events.
type summaryRecord struct {
	ref  string
	span store.RefSpan
}

// compactionAt is the agent's newest compaction as the store holds its
// records.
type compactionAt struct {
	found bool // the session holds the agent's record of a compaction after its compacted prefix
	// boundary is the seq of the last event before that record's that is
	// not the hook's own: where the agent cut.
	boundary uint64
	// covered is the last event the summary stands for: boundary, or the
	// event before the messages the agent keeps verbatim after the
	// summary (Agent.Preserved), which the context holds as they are.
	covered uint64
	summary summaryRecord // ref "" for none
}

// compaction returns the session's newest compaction after its compacted
// prefix, from the session as the import left it: the import stored
// every record of the transcript, the agent's record of a compaction as a
// system event (Agent.IsCompaction), so the store holds whatever the file
// would say. An agent may write a compaction's records after its hooks
// ran (Claude Code does): found is false until a later hook imports them.
// The summary is the record the agent writes right after that one,
// stored as system events. The preserved segment is read from the record
// in t (Agent.Preserved).
func (h *Hook) compaction(session string, at sessionState, t *TranscriptFile) (c compactionAt, err error) {
	if !at.exists {
		return c, nil
	}
	var bound tier.Event
	err = h.db.View(func(s *store.Snapshot) error {
		var after tier.Event // the event after the one looked at; Seq 0 for none
		for hi := at.head; hi > at.compactedTo && !c.found; {
			lo := at.compactedTo + 1
			if hi-lo >= boundaryBlock {
				lo = hi - boundaryBlock + 1
			}
			var block []tier.Event
			if err := s.Events(session, lo, hi, func(e tier.Event) error {
				block = append(block, e)
				return nil
			}); err != nil {
				return err
			}
			for i := len(block) - 1; i >= 0 && !c.found; i-- {
				if c.found = h.agent.IsCompaction(block[i]); c.found {
					bound = block[i]
				} else {
					after = block[i]
				}
			}
			hi = lo - 1
		}
		if !c.found {
			return nil
		}
		// The hook's own events before the record (a check PostCompact
		// stored) are not where Claude Code cut.
		c.boundary = bound.Seq - 1
		for c.boundary > 0 {
			own := false
			if err := s.Events(session, c.boundary, c.boundary, func(e tier.Event) error {
				own = strings.HasPrefix(e.Ref, strataRefPrefix)
				return nil
			}); err != nil {
				return err
			}
			if !own {
				break
			}
			c.boundary--
		}
		c.covered = c.boundary
		// The store keeps the events, not the records' flags: the records
		// between the two that carry no event are not stored, so the
		// summary is the next event's record, when that is a system event
		// — the rest of the compaction's own record when the agent writes
		// the summary in it (Codex's compacted record), else the record
		// after it (Claude Code's isCompactSummary record). A summary
		// without text stores no event, and is not checked.
		if after.Seq != bound.Seq+1 || after.Kind != tier.KindSystem || after.Ref == "" ||
			strings.HasPrefix(after.Ref, strataRefPrefix) {
			return nil
		}
		span, ok, err := s.Ref(session, after.Ref)
		if err == nil && ok {
			span.First = max(span.First, after.Seq)
			c.summary = summaryRecord{ref: after.Ref, span: span}
		}
		return err
	})
	if err != nil || !c.found || bound.Ref == "" {
		return c, err
	}
	head, err := h.agent.Preserved(t, bound)
	if err != nil || head == "" {
		return c, err
	}
	err = h.db.View(func(s *store.Snapshot) error {
		span, ok, err := s.Ref(session, head)
		if err == nil && ok && span.First > 0 && span.First-1 < c.covered {
			c.covered = span.First - 1
		}
		return err
	})
	return c, err
}

// checkRef is the ref of the check of a summary: by the summary's record,
// or — checked from PostCompact's input before the record was written —
// by the head PreCompact compacted (compactedTo), which the hooks after
// it find in the store.
func checkRef(summaryRef string, compactedTo uint64) string {
	if summaryRef != "" {
		return strataRefPrefix + "summary-check:" + summaryRef
	}
	return strataRefPrefix + "summary-check:at:" + strconv.FormatUint(compactedTo, 10)
}

// storeCheck computes the state at c.covered, checks the summary (the
// events of its record, or the input's compact_summary) against it, and
// appends the check as a system event after the session's head — once:
// its ref names the summary's record, or for the input's the head the
// compaction's hook compacted; a summary checked from the input is not
// checked again when its record reaches the store.
func (h *Hook) storeCheck(r *Result, c compactionAt, at sessionState) error {
	session := r.Input.SessionID
	ref := checkRef(c.summary.ref, at.compactedTo)
	var summaryAt int64
	err := h.db.View(func(s *store.Snapshot) error {
		if c.summary.ref != "" && at.compactedTo > 0 {
			if _, checked, err := s.Ref(session, checkRef("", at.compactedTo)); err != nil || checked {
				return err // checked from the input
			}
		}
		st, err := computeState(s, session, c.covered)
		if err != nil {
			return err
		}
		text, at := r.Input.CompactSummary, int64(0)
		if c.summary.ref != "" {
			var b strings.Builder
			if err := s.Events(session, c.summary.span.First, c.summary.span.Last, func(e tier.Event) error {
				b.WriteString(e.Text)
				at = e.Time
				return nil
			}); err != nil {
				return err
			}
			text = b.String()
		}
		if r.Check, err = checkSummary(s, st, text, c.summary.span.First, r.Input.Cwd); err != nil {
			return err
		}
		r.Check.Boundary, r.Check.Agent = c.covered, h.agent.Title()
		if r.Input.Action == ActionCheck && c.summary.ref == "" {
			r.Check.FromInput = r.Input.HookEventName
		}
		summaryAt = at
		return nil
	})
	if err != nil || r.Check == nil {
		return err
	}
	if err := h.appendOwn(session, ref, r.Check.Text(), summaryAt); err != nil {
		return errors.Wrapf(err, "storing the check of %s's summary", h.agent.Title())
	}
	return nil
}

// appendOwn appends one of the hook's own events to session, a system
// event of text whose ref is ref, unless the session holds ref already.
// Its time is that of the session's head, or at when later: the same
// store gives the same event, and the session's times never go back.
func (h *Hook) appendOwn(session, ref, text string, at int64) error {
	var ev *tier.Event
	err := h.db.View(func(s *store.Snapshot) error {
		_, stored, err := s.Ref(session, ref)
		if err != nil || stored {
			return err
		}
		info, err := s.Info(session)
		if err != nil {
			return err
		}
		if err := s.Events(session, info.Head, info.Head, func(e tier.Event) error {
			at = max(at, e.Time)
			return nil
		}); err != nil {
			return err
		}
		ev = &tier.Event{Kind: tier.KindSystem, Time: at, Text: text, Ref: ref}
		return nil
	})
	if err != nil || ev == nil {
		return err
	}
	if _, err := h.db.Append(session, *ev); err != nil && !errors.Is(err, store.ErrRefStored) {
		return err
	}
	return nil
}

// markerAt returns the valid marker with the highest boundary at or
// before boundary (the newest of them), or store.Latest when there is
// none.
func markerAt(s *store.Snapshot, session string, boundary uint64) (uint64, error) {
	var best marker.Marker
	err := s.Markers(session, func(m marker.Marker) error {
		if m.Status == marker.StatusValid && !m.Unchecked && m.Boundary <= boundary &&
			(m.Boundary > best.Boundary || m.Boundary == best.Boundary && m.ID > best.ID) {
			best = m
		}
		return nil
	})
	if err != nil || best.ID == 0 {
		return store.Latest, err
	}
	return best.ID, nil
}

// Line summarizes the run as key=value fields for the hook's log. The
// agent's record of a compaction is named as the agent names it
// (Agent.CompactionRecord): "no_compact_boundary nothing_injected",
// "no_compression nothing_checked".
func (r *Result) Line() string {
	in := &r.Input
	var f []string
	f = append(f, in.HookEventName)
	switch {
	case in.Action == ActionCompact || in.Action == ActionCheck:
		f = append(f, "trigger="+field(in.Trigger))
	case in.Source != "":
		f = append(f, "source="+field(in.Source))
	}
	if in.SessionID != "" {
		f = append(f, "session="+field(in.SessionID))
	}
	if r.Ignored {
		return strings.Join(append(f, "ignored"), " ")
	}
	im := &r.Import
	read := fmt.Sprintf("read=%d..%d", im.From, im.To)
	if im.Full {
		read += " whole_file"
		if im.NotFound {
			read += " (record " + field(im.Anchor) + " not found)"
		}
	}
	f = append(f, read, fmt.Sprintf("events=%d", im.Events))
	if im.Events > 0 {
		f = append(f, fmt.Sprintf("seq=%d..%d", im.First, im.Last))
	}
	if fields := im.Report.Fields(); len(fields) > 2 {
		f = append(f, fields[2:]...)
	}
	for _, c := range r.Compactions {
		if c.Committed() {
			f = append(f, fmt.Sprintf("compacted=%s:%d..%d:marker=%d", c.Depth, c.From, c.To, c.Marker))
		} else {
			f = append(f, fmt.Sprintf("refused=%s:%d..%d:%s", c.Depth, c.From, c.To, c.Refused.Reasons()))
		}
	}
	record := ""
	if r.Agent != nil {
		record = r.Agent.CompactionRecord()
	}
	if r.Unwritten && record != "" {
		f = append(f, record+"_not_written_yet")
	}
	if r.NoBoundary {
		if record == "" {
			record = "compaction"
		}
		if in.Action == ActionCheck {
			f = append(f, "no_"+record+" nothing_checked")
		} else {
			f = append(f, "no_"+record+" nothing_injected")
		}
	}
	if r.Injected {
		f = append(f, "injected_already")
	}
	if st := r.State; st != nil {
		f = append(f, fmt.Sprintf("boundary=%d marker=%d sha256=%s facts=%d shown=%d tokens=%d",
			st.Boundary, st.Marker, st.SHA256, r.Rendered.Facts, r.Rendered.Shown, r.Rendered.Tokens))
	}
	if c := r.Check; c != nil {
		summary := fmt.Sprintf("summary_seq=%d", c.Summary)
		if c.Summary == 0 && c.FromInput != "" {
			summary = "summary_from=" + c.FromInput // the input's, not a stored event's
		}
		f = append(f, fmt.Sprintf("%s summary_boundary=%d summary_unmentioned=%d/%d", summary, c.Boundary, len(c.Unmentioned), c.Facts))
		if len(c.Unmentioned) > 0 {
			f = append(f, "not_mentioned="+fmt.Sprintf("%q", listed(c.Unmentioned, 20)))
		}
	}
	return strings.Join(f, " ")
}

// listed joins the first n of labels with "; ", counting the rest.
func listed(labels []string, n int) string {
	if len(labels) <= n {
		return strings.Join(labels, "; ")
	}
	return strings.Join(labels[:n], "; ") + fmt.Sprintf("; … and %d more", len(labels)-n)
}

// field makes s one key=value value: quoted when it holds a space, a
// quote or a control character.
func field(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == '"' || r == 0x7f }) {
		return fmt.Sprintf("%q", s)
	}
	return s
}
