package store_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	_ "github.com/strata-go/strata" // links the bbolt file and PostgreSQL backends into store.Open
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// ExampleDB_Resume appends an agent's events and resumes the session. With
// no compaction yet there is no marker: the checkpoint at seq 0 serves, and
// the context is the raw log, rendered canonically — the same bytes from
// the same database, whenever and wherever it is read.
func ExampleDB_Resume() {
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

	res, err := db.Append("agent-1",
		tier.Event{Kind: tier.KindUser, Text: "Migrate users.email to citext."},
		tier.Event{Kind: tier.KindToolCall, ID: "c1", Name: "bash", Text: "psql -c '\\d users'"},
	)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("appended seq %d..%d, turn %d\n", res.First, res.Last, res.Turn)

	ctx, err := db.Resume("agent-1", store.Latest)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s", ctx.Text())
	// Output:
	// appended seq 1..2, turn 1
	// # strata context
	// session: agent-1
	// source: checkpoint 1
	// reason: no marker yet
	// summarized: nothing
	// head: seq 2
	//
	// ## raw seq 1..2
	// [1 t1] user:
	//     Migrate users.email to citext.
	// [2 t1] tool_call c1 (bash):
	//     psql -c '\d users'
}
