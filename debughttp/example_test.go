package debughttp_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/strata-go/strata/debughttp"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// ExampleRegister mounts the handler on an agent's mux, as net/http/pprof
// is mounted, and reads the resumed context of a session from it while the
// agent holds the database. A real agent listens on loopback only
// (http.ListenAndServe("127.0.0.1:6060", mux)) and, beyond one machine,
// sets Options.Token or wraps New's handler in its own authentication.
func ExampleRegister() {
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
		tier.Event{Kind: tier.KindRejected, Key: "approach/backfill", Text: "lock timeout"},
	); err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	debughttp.Register(mux, db, debughttp.Options{Token: "s3cret"})
	srv := httptest.NewServer(mux) // the agent: http.ListenAndServe("127.0.0.1:6060", mux)
	defer srv.Close()

	req, _ := http.NewRequest("GET", srv.URL+"/debug/strata/resume?session=agent-1&format=text", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, resp.Header.Get("Content-Type"))
	fmt.Print(string(body))
	// Output:
	// 200 OK text/plain; charset=utf-8
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
	// [2 t1] rejected approach/backfill:
	//     lock timeout
}
