package compaction_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	_ "github.com/strata-go/strata" // links the bbolt file and PostgreSQL backends into store.Open
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// exampleTurns is a short agent session, turn by turn: the seed's incident
// in three turns.
var exampleTurns = [][]tier.Event{
	{
		{Kind: tier.KindUser, Text: "Migrate users.email to citext. It must be reversible."},
		{Kind: tier.KindConstraint, Key: "reversible", Text: "the schema migration must be reversible"},
		{Kind: tier.KindToolCall, ID: "c1", Name: "write_file", Text: "migrations/003_down.sql"},
		{Kind: tier.KindToolResult, ID: "c1", Text: "wrote 4 lines"},
		{Kind: tier.KindArtifact, Key: "migrations/003_down.sql", Text: "rollback script, already written"},
	},
	{
		{Kind: tier.KindUser, Text: "Now the forward migration."},
		{Kind: tier.KindToolCall, ID: "c2", Name: "bash", Text: "psql -f migrations/003_up.sql --dry-run"},
		{Kind: tier.KindToolResult, ID: "c2", Failed: true, Key: "approach/add-column-then-backfill", Text: "lock timeout"},
		{Kind: tier.KindRejected, Key: "approach/add-column-then-backfill", Text: "user rejected after the failed dry run"},
	},
	{
		{Kind: tier.KindUser, Text: "Try an in-place ALTER."},
		{Kind: tier.KindToolCall, ID: "c3", Name: "bash", Text: "psql -c 'select * from pg_extension'"},
	},
}

// ExampleCompactor is an agent loop: append each turn as it happens, run
// the compactor on its policy, and on restart resume from the latest marker.
func ExampleCompactor() {
	dir, err := os.MkdirTemp("", "strata-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "agent.db")

	db, err := store.Open(path, store.Options{Create: true})
	if err != nil {
		log.Fatal(err)
	}
	c, err := compaction.NewCompactor(db, compaction.Options{
		Summarizer: compaction.Extractive{},
		Policy:     compaction.Policy{EveryTurns: 1},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, turn := range exampleTurns {
		if _, err := db.Append("agent-1", turn...); err != nil {
			log.Fatal(err)
		}
		results, err := c.Run(context.Background(), "agent-1")
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range results {
			fmt.Printf("compacted %s seq %d..%d marker %d\n", r.Depth, r.From, r.To, r.Marker)
		}
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}

	// The agent restarts.
	db, err = store.Open(path, store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx, err := db.Resume("agent-1", store.Latest)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("source:", ctx.Source, ctx.Marker)
	for _, line := range strings.Split(string(ctx.Text()), "\n") {
		if strings.HasPrefix(line, "## ") || strings.HasPrefix(line, "- ") || strings.HasPrefix(line, "[") {
			fmt.Println(line)
		}
	}
	// Output:
	// compacted L1 seq 1..5 marker 1
	// compacted L1 seq 6..9 marker 2
	// source: marker 2
	// ## L1 summary 1, seq 1..5
	// - user request at seq 1: Migrate users.email to citext. It must be reversible.
	// - constraint: reversible — the schema migration must be reversible
	// - artifact: migrations/003_down.sql — rollback script, already written
	// ## L1 summary 2, seq 6..9
	// - user request at seq 6: Now the forward migration.
	// - FAILED call c2 (bash), opened at seq 7, failed at seq 8 — lock timeout
	// - rejected: approach/add-column-then-backfill — user rejected after the failed dry run
	// ## raw seq 10..11
	// [10 t3] user:
	// [11 t3] tool_call c3 (bash):
}

// ExampleCompactor_Background is the same agent loop with compaction off
// the agent's path: each Append returns once its events are durable, and
// the Compactor runs on the Background's goroutines, in append order.
func ExampleCompactor_Background() {
	dir, err := os.MkdirTemp("", "strata-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := store.Open(filepath.Join(dir, "agent.db"), store.Options{Create: true})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	c, err := compaction.NewCompactor(db, compaction.Options{
		Summarizer: compaction.Extractive{},
		Policy:     compaction.Policy{EveryTurns: 1},
	})
	if err != nil {
		log.Fatal(err)
	}
	bg := c.Background(context.Background(), func(session string, results []compaction.Result) {
		for _, r := range results {
			fmt.Printf("%s: compacted %s seq %d..%d marker %d\n", session, r.Depth, r.From, r.To, r.Marker)
		}
	})
	for _, turn := range exampleTurns {
		if _, err := bg.Append("agent-1", turn...); err != nil {
			log.Fatal(err)
		}
	}
	if err := bg.Close(); err != nil { // waits for the queued compactions
		log.Fatal(err)
	}
	// Output:
	// agent-1: compacted L1 seq 1..5 marker 1
	// agent-1: compacted L1 seq 6..9 marker 2
}

// ExampleLossy shows a refused compaction: a summarizer that drops negative
// facts and artifacts gets no marker, the audit says why, and resume falls
// back to a raw checkpoint that loses nothing.
func ExampleLossy() {
	dir, err := os.MkdirTemp("", "strata-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := store.Open(filepath.Join(dir, "agent.db"), store.Options{Create: true})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	lossy, err := compaction.NewLossy(compaction.DropNegatives, compaction.DropArtifacts)
	if err != nil {
		log.Fatal(err)
	}
	c, err := compaction.NewCompactor(db, compaction.Options{Summarizer: lossy, Policy: compaction.Policy{EveryTurns: 2}})
	if err != nil {
		log.Fatal(err)
	}
	for _, turn := range exampleTurns {
		if _, err := db.Append("agent-1", turn...); err != nil {
			log.Fatal(err)
		}
		results, err := c.Run(context.Background(), "agent-1")
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range results {
			if !r.Committed() {
				fmt.Printf("refused seq %d..%d reasons=%s\n", r.From, r.To, r.Refused.Reasons())
			}
		}
	}

	ctx, err := db.Resume("agent-1", store.Latest)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("source:", ctx.Source)
	fmt.Println("reason:", ctx.Reason)
	fmt.Println("raw events:", len(ctx.Events))
	// Output:
	// refused seq 1..9 reasons=retention:approach/add-column-then-backfill,retention:c2@7,artifact:migrations/003_down.sql
	// source: checkpoint
	// reason: compaction of seq 1..9 refused: retention:approach/add-column-then-backfill,retention:c2@7,artifact:migrations/003_down.sql
	// raw events: 11
}
