package main

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-go/strata/internal/dbtest"
)

// The real agent sessions of ../shared/data/real, replayed with both
// summarizers: verify finds nothing, and resume is the same bytes twice and
// from a backup.
func TestReplay_RealSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("replays every real session")
	}
	files := dbtest.RealSessions(t)
	for _, sum := range []string{"extractive", "lossy"} {
		t.Run(sum, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			db := tempDB(t)
			out := mustCLI(t, append([]string{"replay", "--db", db, "--every-events", "50", "--summarizer", sum}, files...)...)
			m := regexp.MustCompile(`(?m)^replayed files=(\d+) events=\d+ sessions=\d+ compacted=(\d+) refused=(\d+)$`).FindStringSubmatch(out)
			if m == nil || m[1] != strconv.Itoa(len(files)) || m[2] == "0" {
				t.Fatalf("summary: %q", out[max(0, len(out)-200):])
			}
			if sum == "lossy" && m[3] == "0" {
				t.Errorf("lossy was never refused")
			}
			t.Logf("replay: %s", time.Since(start))
			if got := mustCLI(t, "verify", db); got != "ok\n" {
				t.Errorf("verify: %s", got)
			}
			backup := filepath.Join(t.TempDir(), "backup.db")
			mustCLI(t, "backup", db, backup)
			t.Logf("verify, backup: %s", time.Since(start))
			sessions := sessionsOf(t, db)
			if len(sessions) != len(files) {
				t.Errorf("%d sessions from %d files", len(sessions), len(files))
			}
			// Resume the sessions that have summary nodes, and every tenth
			// of the others: each resume opens the database afresh.
			compacted := map[string]bool{}
			for _, m := range regexp.MustCompile(`(?m)^compacted session=(\S+) `).FindAllStringSubmatch(out, -1) {
				compacted[m[1]] = true
			}
			sources := map[string]int{}
			for i, s := range sessions {
				if !compacted[s] && i%10 != 0 {
					continue
				}
				a, b, c := resume(t, db, s), resume(t, db, s), resume(t, backup, s)
				if a.SHA256 != b.SHA256 || a.SHA256 != c.SHA256 || a.Context != c.Context {
					t.Errorf("session %s: resume diverges: %s %s %s", s, a.SHA256, b.SHA256, c.SHA256)
				}
				sources[a.Source]++
			}
			t.Logf("resume: %s", time.Since(start))
			t.Logf("%s: %s; resume sources %v", sum, strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]), sources)
		})
	}
}
