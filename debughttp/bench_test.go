package debughttp_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/strata-go/strata/debughttp"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
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
