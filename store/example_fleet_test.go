package store_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/internal/pgtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"

	_ "github.com/strata-go/strata" // links the bbolt file and PostgreSQL backends into store.Open
)

// handle runs one job of a fleet worker: a turn of the session it is
// given, wherever that session ran last. It resumes the session (a new
// one has no context yet), runs the turn, appends what happened and
// compacts.
func handle(ctx context.Context, db *store.DB, comp *compaction.Compactor, session string,
	turn func(prompt []byte) []tier.Event) error {
	var prompt []byte
	rc, err := db.Resume(session, store.Latest)
	switch {
	case err == nil:
		prompt = rc.Text() // the same bytes whichever worker resumes it
	case !errors.Is(err, store.ErrSessionNotFound):
		return err
	}
	if _, err := db.Append(session, turn(prompt)...); err != nil {
		return err
	}
	_, err = comp.Run(ctx, session) // store.ErrConflict: other workers kept compacting it first
	return err
}

// runTurn stands for the agent's turn: the model given the context, and
// its tools.
func runTurn(prompt []byte) []tier.Event {
	return []tier.Event{
		{Kind: tier.KindUser, Text: "Next step."},
		{Kind: tier.KindAssistant, Text: "Done."},
	}
}

// Example_fleetWorker is a worker of a fleet of agents that share one
// PostgreSQL store: handed a session id — here one a line on stdin, in a
// fleet from a queue — it resumes that session, whichever worker on
// whichever machine ran it last, and runs a turn of it. Any number of
// workers run at once; appends to one session take turns.
func Example_fleetWorker() {
	db, err := store.Open(os.Getenv("STRATA_DB"), store.Options{Create: true}) // postgres://agent@db.internal/fleet
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	comp, err := compaction.NewCompactor(db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: compaction.DefaultPolicy})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	jobs := bufio.NewScanner(os.Stdin)
	for jobs.Scan() {
		if err := handle(ctx, db, comp, jobs.Text(), runTurn); err != nil {
			log.Printf("session %s: %v", jobs.Text(), err) // the job goes back to the queue
		}
	}
}

// TestExample_FleetWorker runs the fleet worker's handle
// (example_fleet_test.go) in two workers, each with a DB of its own on one
// PostgreSQL store, taking turns of one session, new at the first: each
// worker resumes what the other appended and compacted, and both resume it
// to the same bytes.
func TestExample_FleetWorker(t *testing.T) {
	url := pgtest.URL(t)
	var dbs [2]*store.DB
	var comps [2]*compaction.Compactor
	for w := range dbs {
		db, err := store.Open(url, store.Options{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		dbs[w] = db
		if comps[w], err = compaction.NewCompactor(db, compaction.Options{Summarizer: compaction.Extractive{},
			Policy: compaction.Policy{EveryEvents: 4, Fold: 2}}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	var prompts []string
	const turns = 12
	for i := range turns {
		w := i % 2
		turn := func(prompt []byte) []tier.Event {
			prompts = append(prompts, string(prompt))
			return []tier.Event{
				{Kind: tier.KindUser, Text: fmt.Sprintf("step %d", i)},
				{Kind: tier.KindToolCall, ID: fmt.Sprintf("c%d", i), Name: "bash"},
				{Kind: tier.KindToolResult, ID: fmt.Sprintf("c%d", i), Text: fmt.Sprintf("worker %d", w)},
			}
		}
		if err := handle(ctx, dbs[w], comps[w], "agent-1", turn); err != nil {
			t.Fatalf("turn %d in worker %d: %v", i, w, err)
		}
		info, err := dbs[1-w].Info("agent-1")
		if err != nil || info.Head != uint64(3*(i+1)) {
			t.Fatalf("after turn %d in worker %d, the other sees %+v, %v", i, w, info, err)
		}
	}
	if prompts[0] != "" || !strings.Contains(prompts[1], "worker 0") {
		t.Fatalf("the first turn's prompt %q (a new session), the second's %q: want the first worker's turn in it", prompts[0], prompts[1])
	}
	var shas [2]string
	for w, db := range dbs {
		rc, err := db.Resume("agent-1", store.Latest)
		if err != nil {
			t.Fatal(err)
		}
		if rc.Source != "marker" {
			t.Fatalf("worker %d resumes from %s: %s; want a marker", w, rc.Source, rc.Reason)
		}
		shas[w] = rc.SHA256()
	}
	if shas[0] != shas[1] {
		t.Fatalf("the workers resume to %s and %s", shas[0], shas[1])
	}
	dbtest.Verify(t, dbs[0])
}

// The README's fleet worker is example_fleet_test.go's, line for line.
func TestExample_FleetWorkerInREADME(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_fleet_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "```go\nfunc handle(")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("README.md: no go block that begins with func handle(")
	}
	var lines []string
	for l := range strings.SplitSeq(string(src), "\n") {
		lines = append(lines, strings.TrimSpace(l))
	}
	at := 0
	for l := range strings.SplitSeq("func handle("+block, "\n") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		i := slices.Index(lines[at:], l)
		if i < 0 {
			t.Fatalf("README.md's fleet worker: %q is not the next line of example_fleet_test.go's", l)
		}
		at += i + 1
	}
}
