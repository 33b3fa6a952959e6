package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/compaction/openai"
	"github.com/strata-go/strata/store"
)

// compactOptions are the flags and arguments of `strata compact`.
type compactOptions struct {
	db       string
	sessions []string
	policyFlags
	summarizerFlags
	timeout time.Duration
	json    bool
}

// newCompactCommand returns `strata compact`.
func newCompactCommand() *cobra.Command {
	o := &compactOptions{}
	cmd := &cobra.Command{
		Use:   "compact DB [--session ID]... [--window N] [--share F] [--every-tokens N] [--every N] [--every-events M] [--fold K] [--max-roots R] [--summarizer extractive|lossy|openai] [--retries R] [--repair] [--json]",
		Short: "Compact the events a database holds, as replay would have",
		Long: `Compact what the database holds under the policy: in every session, or in
each --session given, the compactions the policy makes due over the
uncompacted tail, where a replay that compacted as it went would have made
them — for events stored while the summarizer did not answer, or stored
under another policy. The policy flags and the summarizer flags are
replay's (strata replay --help).

It is idempotent: what is compacted, and a span refused, is not asked for
again, so a second run adds nothing; a run stopped (a model that does not
answer, Ctrl-C) goes on where it stopped when run again.

Each compaction prints one line, as replay prints them, and a closing line
sums up: compact sessions=S compacted=C refused=R (and with --repair
repaired=P), S the sessions in which anything was compacted or refused. --json prints JSON lines: one per compaction as replay --json
prints them, then {"type":"compact", "sessions", "compacted", "refused",
"repaired"}.

A --session the database does not hold is an error, before anything is
compacted.`,
		Args: exactArgs("DB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.db = args[0]
			o.summarizerFlags.changed(cmd.Flags())
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.sessions, "session", nil, "compact this session only; repeat it for more (default: every session)")
	o.policyFlags.add(f)
	o.summarizerFlags.add(f)
	addJSONFlag(cmd, &o.json, "JSON lines: one object per compaction, then the summary")
	addTimeoutFlag(cmd, &o.timeout)
	completeSessions(cmd)
	return cmd
}

// validate checks the flags and builds the summarizer; its errors are bad
// usage.
func (o *compactOptions) validate() error {
	for _, s := range o.sessions {
		if err := store.CheckSession(s); err != nil {
			return &usageError{err: errors.Wrap(err, "--session")}
		}
	}
	if err := o.policyFlags.validate(); err != nil {
		return err
	}
	if err := checkTimeout(o.timeout); err != nil {
		return err
	}
	return o.summarizerFlags.validate()
}

// run compacts the sessions and prints what it did, the closing line
// whatever happens once the database is open.
func (o *compactOptions) run(ctx context.Context, out, errOut io.Writer) (err error) {
	db, err := store.Open(o.db, store.Options{LockTimeout: o.timeout})
	if err != nil {
		return explainOpen(err)
	}
	defer closeDB(db, &err)
	comp, err := compaction.NewCompactor(db, o.options(o.policy()))
	if err != nil {
		return err
	}
	r := newReplayer(ctx, db, out, o.json)
	r.prog = newProgress(errOut, "compact", "sessions", 0)
	o.command, o.prog, o.errOut = "compact", r.prog, errOut
	sessions := 0
	defer func() {
		r.prog.finish()
		if errors.Is(err, openai.ErrTimeout) {
			err = errors.WithHint(err, "give the model more time per request with --llm-timeout")
		}
		if err != nil && !errors.Is(err, store.ErrSessionNotFound) {
			err = errors.WithHint(err, "what was compacted stays; run the command again to go on where it stopped")
		}
		o.summary(out, r, sessions)
	}()
	return comp.RunSessions(ctx, o.sessions, func(session string, rs []compaction.Result) {
		sessions++
		r.prog.add(1)
		r.reportRun(session, rs)
	})
}

// compactJSON is the closing line of `compact --json`.
type compactJSON struct {
	Type      string `json:"type"` // "compact"
	Sessions  int    `json:"sessions"`
	Compacted int    `json:"compacted"`
	Refused   int    `json:"refused"`
	Repaired  *int   `json:"repaired,omitempty"` // with --repair
}

// summary prints the closing line: the sessions in which something was
// compacted or refused, and how many of each.
func (o *compactOptions) summary(out io.Writer, r *replayer, sessions int) {
	if o.json {
		s := compactJSON{Type: "compact", Sessions: sessions, Compacted: r.compacted, Refused: r.refused}
		if o.repair {
			s.Repaired = &r.repaired
		}
		io.WriteString(out, jsonLine(s))
		return
	}
	repaired := ""
	if o.repair {
		repaired = fmt.Sprintf(" repaired=%d", r.repaired)
	}
	fmt.Fprintf(out, "compact sessions=%d compacted=%d refused=%d%s\n", sessions, r.compacted, r.refused, repaired)
}

// compactHint is the hint of a replay or import that stored events and
// could not compact them: the compact command that goes on, on db with
// the policy and summarizer flags cmd was given.
func compactHint(cmd *cobra.Command, db string) string {
	names := map[string]bool{}
	for _, n := range policyFlagNames {
		names[n] = true
	}
	probe := pflag.NewFlagSet("", pflag.ContinueOnError)
	new(summarizerFlags).add(probe)
	probe.VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
	line := "strata compact " + shellQuote(shownDB(db))
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if names[f.Name] {
			line += " --" + f.Name + "=" + shellQuote(f.Value.String())
		}
	})
	return "the events read are stored; to compact them once the cause is mended, run: " + line
}
