package debughttp_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/strata-go/strata/debughttp"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// BenchmarkPage_ClaudeCode measures what the page asks for on the real
// Claude Code session (560 events, compacted every 5 events): the events
// endpoint's window at the head, which the timeline reads, beside the
// session's whole raw dump, its peer, which a page that drew every event
// would read; the session and nodes endpoints it polls and reads once per
// frame change. resp-bytes is the answer's size.
func BenchmarkPage_ClaudeCode(b *testing.B) {
	db := dbtest.Open(b, store.Options{NoSync: true})
	const id = "claude"
	importClaudeCode(b, db, id, claudeCodePolicy)
	srv := serve(b, db, debughttp.Options{})
	base := srv.URL + debughttp.DefaultPrefix
	for _, bc := range []struct{ name, path string }{
		{"events-window", "/events?session=" + id},
		{"dump-whole", "/dump?format=json&raw=1&session=" + id},
		{"session", "/session?session=" + id},
		{"nodes", "/nodes?session=" + id},
		{"sessions", "/sessions"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var n int64
			for b.Loop() {
				resp, err := http.Get(base + bc.path)
				if err != nil {
					b.Fatal(err)
				}
				n, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("%s: %s %v", bc.path, resp.Status, err)
				}
			}
			b.ReportMetric(float64(n), "resp-bytes")
		})
	}
}

// BenchmarkPage_ManySessions measures what the page polls on a database
// of n sessions of one event each: the index (every poll), the session
// list (when the index changed) and one session's view (every poll, its
// forks read from every session's origin), beside the same view on a
// database of that session alone, its peer.
func BenchmarkPage_ManySessions(b *testing.B) {
	for _, n := range []int{1, 1000, 10000} {
		db := dbtest.Open(b, store.Options{NoSync: true})
		for i := range n {
			if _, err := db.Append(fmt.Sprintf("s%05d", i), tier.Event{Kind: tier.KindUser, Text: "Do it."}); err != nil {
				b.Fatal(err)
			}
		}
		base := serve(b, db, debughttp.Options{}).URL + debughttp.DefaultPrefix
		for _, path := range []string{"/", "/sessions", "/session?session=s00000"} {
			b.Run(fmt.Sprintf("sessions=%d/%s", n, path), func(b *testing.B) {
				for b.Loop() {
					resp, err := http.Get(base + path)
					if err != nil {
						b.Fatal(err)
					}
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != http.StatusOK {
						b.Fatalf("%s: %s %v", path, resp.Status, err)
					}
				}
			})
		}
	}
}
