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

// The real Claude Code transcripts imported under the default policy, as a
// user's first import: the 560-event session (143k tokens) gets a handful
// of summaries, one per ~42k tokens of tail, and every session outgrowing
// that boundary gets at least one; verify finds nothing.
func TestImport_RealClaudeCodeUnderDefaults(t *testing.T) {
	files := realClaudeCodeTranscripts(t)
	db := tempDB(t)
	out := mustCLI(t, append([]string{"import", "--format", "claude-code", "--db", db}, files...)...)
	perSession := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^compacted session=(\S+) depth=1 `).FindAllStringSubmatch(out, -1) {
		perSession[m[1]]++
	}
	events := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^imported file=\S+ session=(\S+) events=(\d+) `).FindAllStringSubmatch(out, -1) {
		events[m[1]], _ = strconv.Atoi(m[2])
	}
	if len(events) != len(files) {
		t.Fatalf("%d sessions imported from %d files:\n%s", len(events), len(files), out)
	}
	for s, n := range events {
		t.Logf("%s: %d events, %d L1 summaries", s, n, perSession[s])
		if n >= 500 && (perSession[s] < 2 || perSession[s] > 8) {
			t.Errorf("%s: %d events got %d L1 summaries under the default policy, want a handful (2..8)", s, n, perSession[s])
		}
		if perSession[s] == 0 {
			t.Errorf("%s: no summary: every real transcript outgrows the default's L1 boundary", s)
		}
	}
	if got := mustCLI(t, "verify", db); got != "ok\n" {
		t.Errorf("verify: %s", got)
	}
}
