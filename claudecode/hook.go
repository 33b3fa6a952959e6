package claudecode

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// boundaryBlock is how many events SessionStart reads at a time, walking
// back from the head for the newest compact_boundary record's event.
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

// Hook runs Claude Code's hook events against a store: the hook's
// compactions are the extractive summarizer's (valid by construction),
// one L1 node per Claude Code compaction, folded four roots at a time
// (compaction.DefaultFold) into nodes of DefaultBudget tokens.
type Hook struct {
	db   *store.DB
	comp *compaction.Compactor
	opts Options
}

// New returns a Hook over db.
func New(db *store.DB, opts Options) (*Hook, error) {
	comp, err := compaction.NewCompactor(db, compaction.Options{Summarizer: compaction.Extractive{},
		Policy: compaction.Policy{Fold: compaction.DefaultFold, Budget: compaction.DefaultBudget}})
	if err != nil {
		return nil, err
	}
	if opts.DB == "" {
		opts.DB = "DB"
	}
	return &Hook{db: db, comp: comp, opts: opts}, nil
}

// Result is what one hook run did.
type Result struct {
	Input   Input
	Ignored bool // an event or source the hook does not act on: nothing was done
	Import  Import
	// Compactions are those the run made: at PreCompact the span to the
	// head and the folds it made due; at SessionStart the span to the
	// boundary when no compaction had reached it.
	Compactions []compaction.Result
	// SessionStart(compact): the state injected, as rendered, and the
	// check of Claude Code's summary (nil when the transcript holds no
	// summary after the boundary).
	State    *State
	Rendered Rendered
	Check    *Check
	// Unwritten says that the transcript did not hold the compaction's
	// compact_boundary record yet: the boundary is the head PreCompact
	// compacted.
	Unwritten bool
	// NoBoundary says that SessionStart(compact) found no compaction
	// boundary — no compact_boundary record in the transcript, and no
	// PreCompact compaction in the store: what it imported stays stored
	// (as the next PreCompact would store it), nothing is injected.
	NoBoundary bool
	// Output is what the hook prints on stdout: the JSON Claude Code
	// reads after SessionStart(compact), nil otherwise.
	Output []byte
}

// Run handles one hook event: PreCompact imports the transcript and
// compacts the session's head, so that a marker stands where Claude Code
// is about to cut; SessionStart with source "compact" imports what Claude
// Code wrote since and returns, as Result.Output, the state at the
// boundary to add to the context. Every other event is ignored, its
// transcript not opened. A failure is an error naming what failed; the
// CLI logs it and exits 0. Run is Input.OpenTranscript and RunTranscript.
func (h *Hook) Run(ctx context.Context, in Input) (*Result, error) {
	if !in.Handled() {
		return &Result{Input: in, Ignored: true}, nil
	}
	t, err := in.OpenTranscript()
	if err != nil {
		return &Result{Input: in}, err
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
	r := &Result{Input: in}
	if !in.Handled() {
		r.Ignored = true
		return r, nil
	}
	var at sessionState
	var err error
	if r.Import, at, err = importTranscript(h.db, in.SessionID, t.file, false); err != nil {
		return r, errors.Wrapf(err, "importing transcript %s", in.TranscriptPath)
	}
	if in.HookEventName == EventPreCompact {
		return r, h.preCompact(ctx, r, at)
	}
	return r, h.sessionStart(ctx, r, at)
}

// preCompact compacts the session's head, as the import left it: every
// event imported is about to leave Claude Code's context. A head that is
// strata's own event — the check SessionStart stored — says that no record
// reached the transcript since SessionStart read it: a hook run again, not
// a new compaction, so nothing is compacted (and should Claude Code
// compact with nothing new, SessionStart makes the marker at its
// boundary).
func (h *Hook) preCompact(ctx context.Context, r *Result, at sessionState) error {
	if !at.exists || at.ownHead {
		return nil // a transcript with nothing to store yet, or nothing new
	}
	var err error
	r.Compactions, err = h.comp.CompactTo(ctx, r.Input.SessionID, at.head)
	return errors.Wrap(err, "compacting the session")
}

// sessionStart finds Claude Code's compaction boundary in the store,
// makes sure a marker stands at it, checks Claude Code's summary against
// the state there, stores that check, and renders the state.
func (h *Hook) sessionStart(ctx context.Context, r *Result, at sessionState) error {
	session := r.Input.SessionID
	boundary, summary, err := h.boundary(r, at)
	if err != nil || r.NoBoundary {
		return err
	}
	if boundary > 0 {
		// PreCompact made a marker here, unless it did not run or records
		// before the boundary were written after it ran.
		if r.Compactions, err = h.comp.CompactTo(ctx, session, boundary); err != nil {
			return errors.Wrap(err, "compacting the session to the boundary")
		}
	}
	if summary.ref != "" {
		if err := h.storeCheck(r, boundary, summary); err != nil {
			return err
		}
	}
	err = h.db.View(func(s *store.Snapshot) error {
		if r.State == nil {
			if r.State, err = computeState(s, session, boundary); err != nil {
				return err
			}
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
	r.Rendered = r.State.Render(h.opts.DB, h.opts.Budget)
	r.Output, err = hookOutput(r.Rendered.Text)
	return err
}

// summaryRecord is the record of Claude Code's summary in the store: its
// ref and its events.
type summaryRecord struct {
	ref  string
	span store.RefSpan
}

// boundary returns the seq of the last event before the event of the
// session's newest compact_boundary record, and the record of Claude
// Code's summary after it (ref "" for none), from the session as the
// import left it: the import stored every record of the transcript, the
// compact_boundary record as a system event (transcript.
// IsClaudeCodeCompaction), so the store holds whatever the file would
// say. Claude Code writes its records asynchronously: when the session
// holds no compaction event after the head PreCompact compacted — the new
// compact_boundary is not written yet, or there is none — the boundary is
// that head, where PreCompact saw Claude Code about to cut
// (Result.Unwritten), and there is no summary to check. When there is
// neither, there is no boundary (Result.NoBoundary).
func (h *Hook) boundary(r *Result, at sessionState) (boundary uint64, summary summaryRecord, err error) {
	session := r.Input.SessionID
	if !at.exists {
		r.NoBoundary = true
		return 0, summary, nil
	}
	var found bool
	err = h.db.View(func(s *store.Snapshot) error {
		// Back from the head a block at a time, down to the first event after
		// the compacted prefix: a compaction before it is older than the
		// head PreCompact compacted.
		var after tier.Event // the event after the one looked at; Seq 0 for none
		var bound tier.Event
		for hi := at.head; hi > at.compactedTo && !found; {
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
			for i := len(block) - 1; i >= 0 && !found; i-- {
				if found = transcript.IsClaudeCodeCompaction(block[i]); found {
					bound = block[i]
				} else {
					after = block[i]
				}
			}
			hi = lo - 1
		}
		if !found {
			return nil
		}
		boundary = bound.Seq - 1
		// The summary is the record Claude Code writes right after its
		// compact_boundary record, the user record it flags
		// isCompactSummary, stored as system events. The store keeps the
		// events, not the flag: the records between the two that carry no
		// event (progress, file history) are not stored, so the summary is
		// the record of the next event, when that is a system event of a
		// record. A summary without text stores no event, and is not
		// checked.
		if after.Seq != bound.Seq+1 || after.Kind != tier.KindSystem || after.Ref == "" ||
			after.Ref == bound.Ref || strings.HasPrefix(after.Ref, strataRefPrefix) {
			return nil
		}
		span, ok, err := s.Ref(session, after.Ref)
		if err == nil && ok {
			summary = summaryRecord{ref: after.Ref, span: span}
		}
		return err
	})
	switch {
	case err != nil:
		return 0, summaryRecord{}, err
	case !found && at.compactedTo > 0:
		r.Unwritten = true
		return at.compactedTo, summaryRecord{}, nil
	case !found:
		r.NoBoundary = true
		return 0, summaryRecord{}, nil
	}
	return boundary, summary, nil
}

// storeCheck computes the state at boundary, checks the summary (the
// events of its record) against it, and appends the check as a system
// event after the session's head — once: its ref names the summary's
// record.
func (h *Hook) storeCheck(r *Result, boundary uint64, summary summaryRecord) error {
	session := r.Input.SessionID
	ref := strataRefPrefix + "summary-check:" + summary.ref
	var ev *tier.Event
	err := h.db.View(func(s *store.Snapshot) error {
		var err error
		if r.State, err = computeState(s, session, boundary); err != nil {
			return err
		}
		var text strings.Builder
		var at int64
		if err := s.Events(session, summary.span.First, summary.span.Last, func(e tier.Event) error {
			text.WriteString(e.Text)
			at = e.Time
			return nil
		}); err != nil {
			return err
		}
		if r.Check, err = checkSummary(s, r.State, text.String(), summary.span.First, r.Input.Cwd); err != nil {
			return err
		}
		_, stored, err := s.Ref(session, ref)
		if err != nil || stored {
			return err
		}
		// The time of the newest event it follows, or the summary's when
		// that is later: the same store gives the same event, and the
		// session's times never go back.
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
		ev = &tier.Event{Kind: tier.KindSystem, Time: at, Text: r.Check.Text(boundary), Ref: ref}
		return nil
	})
	if err != nil || ev == nil {
		return err
	}
	if _, err := h.db.Append(session, *ev); err != nil && !errors.Is(err, store.ErrRefStored) {
		return errors.Wrap(err, "storing the check of Claude Code's summary")
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

// hookOutput is SessionStart's JSON output adding text to the context.
func hookOutput(text string) ([]byte, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		HookSpecificOutput struct {
			HookEventName     string `json:"hookEventName"`
			AdditionalContext string `json:"additionalContext"`
		} `json:"hookSpecificOutput"`
	}{HookSpecificOutput: struct {
		HookEventName     string `json:"hookEventName"`
		AdditionalContext string `json:"additionalContext"`
	}{EventSessionStart, text}})
	return []byte(b.String()), err
}

// Line summarizes the run as key=value fields for the hook's log.
func (r *Result) Line() string {
	in := &r.Input
	var f []string
	f = append(f, in.HookEventName)
	switch {
	case in.HookEventName == EventPreCompact:
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
		if im.Anchor != "" {
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
	if r.Unwritten {
		f = append(f, "compact_boundary_not_written_yet")
	}
	if r.NoBoundary {
		f = append(f, "no_compact_boundary nothing_injected")
	}
	if st := r.State; st != nil {
		f = append(f, fmt.Sprintf("boundary=%d marker=%d sha256=%s facts=%d shown=%d tokens=%d",
			st.Boundary, st.Marker, st.SHA256, r.Rendered.Facts, r.Rendered.Shown, r.Rendered.Tokens))
	}
	if c := r.Check; c != nil {
		f = append(f, fmt.Sprintf("summary_seq=%d summary_unmentioned=%d/%d", c.Summary, len(c.Unmentioned), c.Facts))
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
