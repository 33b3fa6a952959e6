package dump_test

import (
	"log"
	"os"
	"path/filepath"

	"github.com/strata-go/strata/dump"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// ExampleText renders a database's readable dump from one read
// transaction; dump.JSON and dump.Dot take the same arguments.
func ExampleText() {
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
	if _, err := db.Append("agent-1",
		tier.Event{Kind: tier.KindUser, Text: "Migrate users.email to citext."},
		tier.Event{Kind: tier.KindToolCall, ID: "c1", Name: "bash", Text: "psql -f up.sql --dry-run"},
	); err != nil {
		log.Fatal(err)
	}

	err = db.View(func(s *store.Snapshot) error {
		return dump.Text(os.Stdout, s, dump.Options{})
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// strata database: format_version=7 sessions=1
	//
	// session agent-1: head_seq=2 turn=1
	//   frame: version=0 depth=0 compacted_to=0 roots=0
	//   roots: 0
	//   markers:
	//   checkpoints:
	//     checkpoint 1: seq=0 status=valid prefix=[] why="session start"
	//   ledger at head:
	//     open tool_call c1 name=bash seq=2
	//   audit:
}
