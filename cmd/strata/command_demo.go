package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata"
	"github.com/strata-go/strata/backend/postgres"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/store"
)

// The demo's two sessions, one per summarizer, and the two facts the
// incident is about.
var (
	demoSessions = []string{"incident-lossy", "incident-extractive"}
	demoFacts    = []struct{ state, key string }{
		{"rejected", "approach/add-column-then-backfill"},
		{"artifact", "migrations/003_down.sql"},
	}
)

// demoPolicy is the demo's policy. Its incident is 63 events, about 3,300
// tokens: the default policy, sized for a model's window, would make no
// summary of it; a summary every 500 tokens of tail shows refusals, folds
// and markers.
var demoPolicy = compaction.Policy{EveryTokens: 500, Fold: compaction.DefaultFold, Budget: compaction.DefaultBudget}

// demoOptions are the flags of `strata demo`.
type demoOptions struct {
	db string
}

// newDemoCommand returns `strata demo`.
func newDemoCommand() *cobra.Command {
	o := &demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo [DB]",
		Short: "Replay the seed's incident twice: refused lossy summaries and their fallback, then valid markers",
		Long: `Replay the seed's incident — a coding session, a schema migration in which a
rollback script is written and the user rejects an approach after its dry run
failed — into a new database (default strata-demo.db) under a policy sized
for its 63 events: a summary each time the uncompacted tail reaches ` + strconv.Itoa(demoPolicy.EveryTokens) + `
tokens, and a fold of every ` + strconv.Itoa(demoPolicy.Fold) + ` summaries (the default policy, sized for a
model's window of ` + strconv.Itoa(compaction.DefaultWindow) + ` tokens, would compact none of them). First with the lossy summarizer, which drops
negative facts and artifacts: every compaction is refused, each next one over
a longer span, and resume falls back to a raw checkpoint whose raw events still
hold both facts. Then with the extractive one: every summary commits, the
first four are folded into one, and the resumed context holds both facts as
claims.

An existing file at DB is replaced only if it holds nothing but the demo's
sessions. DB may also be given as --db DB.`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) > 1:
				return usagef("demo takes at most one argument (DB), got %d", len(args))
			case len(args) == 1 && cmd.Flags().Changed("db"):
				return usagef("demo: the database given twice (%s and --db %s): give it once", args[0], o.db)
			case len(args) == 1:
				o.db = args[0]
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.db == "" {
				return usagef("--db must not be empty")
			}
			if postgres.IsURL(o.db) || isURL(o.db) {
				// The demo replaces only an earlier demo's file: a
				// server's schema may hold anyone's sessions.
				return usagef("demo writes a database file, not %s: give it a path", shownDB(o.db))
			}
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&o.db, "db", "strata-demo.db", "the database file to create: the argument's other form")
	return cmd
}

func (o *demoOptions) run(ctx context.Context, out io.Writer) (err error) {
	if err := o.clear(); err != nil {
		return err
	}
	if err := checkParentDir(o.db); err != nil {
		return err
	}
	db, err := store.Open(o.db, store.Options{Create: true})
	if err != nil {
		return explainOpen(err)
	}
	defer closeDB(db, &err)
	fmt.Fprintf(out, "strata demo: the seed's incident, replayed into %s under a policy sized for its 63 events (a summary every %d tokens, folds of %d)\n",
		o.db, demoPolicy.EveryTokens, demoPolicy.Fold)
	for i, session := range demoSessions {
		name := strings.TrimPrefix(session, "incident-")
		sum, err := compaction.New(name, []string{compaction.DropNegatives, compaction.DropArtifacts})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "\n%d. summarizer %s", i+1, name)
		if name == "lossy" {
			fmt.Fprint(out, " (drops negatives and artifacts)")
		}
		fmt.Fprintf(out, ", session %s\n", session)
		comp, err := compaction.NewCompactor(db, compaction.Options{Summarizer: sum, Policy: demoPolicy})
		if err != nil {
			return err
		}
		r := newReplayer(ctx, db, out, false)
		r.bg = comp.Background(ctx, r.reportRun)
		in := bytes.Replace(strata.DemoJSONL, []byte(`"session":"migration"`), []byte(`"session":"`+session+`"`), 1)
		err = r.replayFile("-", bytes.NewReader(in))
		if cerr := r.bg.Close(); cerr != nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		rc, err := db.Resume(session, store.Latest)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "resume: source=%s", rc.Source)
		if rc.Source == "marker" {
			fmt.Fprintf(out, " marker=%d", rc.Marker)
		} else {
			fmt.Fprintf(out, " checkpoint=%d", rc.Checkpoint)
		}
		if rc.Reason != "" {
			fmt.Fprintf(out, " reason=%q", rc.Reason)
		}
		fmt.Fprintf(out, " sha256=%s\n", rc.SHA256()[:16])
		text := string(rc.Text())
		for _, fact := range demoFacts {
			fmt.Fprintf(out, "  %s %s: %s\n", fact.state, fact.key, demoWhere(text, fact.state, fact.key))
		}
	}
	fmt.Fprintf(out, "\nLook closer:\n  strata dump %s\n  strata resume %s --session %s\n", o.db, o.db, demoSessions[0])
	return nil
}

// demoWhere says where the context states that key is in state: a claim
// of a summary node ("- rejected: key") or a raw event ("[20 t4] rejected
// key"). A mere mention does not count.
func demoWhere(text, state, key string) string {
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, "- "+state+": "+key):
			return "held as a claim of a summary node"
		case strings.HasPrefix(l, "[") && strings.Contains(l, "] "+state+" "+key):
			return "held as raw event " + l[:strings.IndexByte(l, ']')+1]
		}
	}
	return "MISSING from the context"
}

// clear removes an earlier demo database at o.db, and refuses to touch any
// other file.
func (o *demoOptions) clear() error {
	if _, err := os.Stat(o.db); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	db, err := store.Open(o.db, store.Options{ReadOnly: true, LockTimeout: time.Second})
	if err != nil {
		return errors.WithHint(errors.Wrapf(explainOpen(err), "%s exists", o.db), "name a new path for the demo's database")
	}
	ids, err := db.Sessions()
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	for _, id := range ids {
		if id != demoSessions[0] && id != demoSessions[1] {
			return errors.WithHint(errors.Newf("%s holds session %q, not only the demo's: not replacing it", o.db, id),
				"name a new path for the demo's database")
		}
	}
	return os.Remove(o.db)
}
