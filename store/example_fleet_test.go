package store_test

import (
	"bufio"
	"context"
	"errors"
	"log"
	"os"

	_ "github.com/strata-go/strata" // links the bbolt file and PostgreSQL backends into store.Open
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
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
