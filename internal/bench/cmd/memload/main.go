// Command memload makes the inputs the memory figures of docs/performance.md
// are measured on (section Memory), so that no large file is kept in the
// repository:
//
//	go run ./internal/bench/cmd/memload conv -n 1000000 > conv.jsonl          # one OpenAI conversation, a message a line
//	go run ./internal/bench/cmd/memload conv -n 1000000 -object > conv.json   # the same as one conversation object
//	go run ./internal/bench/cmd/memload events -n 1000000 > events.jsonl      # raw events for strata replay
//	go run ./internal/bench/cmd/memload append -n 1000000 -batch 1000000 -db x.db  # Append calls of -batch events
//
// Measure a run's peak memory with /usr/bin/time -v (Maximum resident set
// size), on a built binary: go build -o /tmp/memload ./internal/bench/cmd/memload.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"

	_ "github.com/strata-go/strata/backend/boltfile" // opens files
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: memload conv|events|append [flags]"))
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	n := fs.Int("n", 1_000_000, "messages or events")
	object := fs.Bool("object", false, "conv: one conversation object {\"id\",\"messages\":[…]} instead of a message a line")
	batch := fs.Int("batch", 1_000_000, "append: events per Append call")
	path := fs.String("db", "", "append: the database (created)")
	fs.Parse(os.Args[2:])
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	switch os.Args[1] {
	case "conv":
		conv(w, *n, *object)
	case "events":
		for i := range *n {
			fmt.Fprintf(w, "{\"session\":\"big\",\"kind\":%q,\"text\":\"message %d\"}\n", kind(i), i)
		}
	case "append":
		if err := appendAll(*path, *n, *batch); err != nil {
			fail(err)
		}
	default:
		fail(fmt.Errorf("unknown command %q", os.Args[1]))
	}
	if err := w.Flush(); err != nil {
		fail(err)
	}
}

// kind alternates user and assistant.
func kind(i int) string {
	if i%2 == 0 {
		return "user"
	}
	return "assistant"
}

// conv writes one conversation of n short messages.
func conv(w *bufio.Writer, n int, object bool) {
	if object {
		w.WriteString("{\"id\":\"big\",\"messages\":[\n")
	}
	for i := range n {
		sep := "\n"
		if object && i < n-1 {
			sep = ",\n"
		}
		fmt.Fprintf(w, "{\"role\":%q,\"content\":\"m%d\"}%s", kind(i), i, sep)
	}
	if object {
		w.WriteString("]}\n")
	}
}

// appendAll appends n short events to session "big" of a new database at
// path, batch events per call.
func appendAll(path string, n, batch int) error {
	if path == "" {
		return fmt.Errorf("append needs -db")
	}
	db, err := store.Open(path, store.Options{Create: true, NoSync: true})
	if err != nil {
		return err
	}
	defer db.Close()
	for done := 0; done < n; {
		k := min(batch, n-done)
		evs := make([]tier.Event, k)
		for i := range evs {
			evs[i] = tier.Event{Kind: tier.KindUser, Text: fmt.Sprintf("message %d", done+i)}
			if (done+i)%2 == 1 {
				evs[i].Kind = tier.KindAssistant
			}
		}
		if _, err := db.Append("big", evs...); err != nil {
			return err
		}
		done += k
	}
	return db.Close()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "memload:", err)
	os.Exit(1)
}
