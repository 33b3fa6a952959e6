package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// ClaudeCodeDir returns the directory of the real Claude Code transcripts
// (../shared/data/claude-code seen from the module root), looked for from
// the working directory upwards, or "" when absent.
func ClaudeCodeDir() string {
	for _, up := range []string{".", "..", "../..", "../../..", "../../../.."} {
		dir := filepath.Join(up, "..", "shared", "data", "claude-code")
		if m, _ := filepath.Glob(filepath.Join(dir, "*.jsonl")); len(m) > 0 {
			return dir
		}
	}
	return ""
}

// LoadClaudeCode imports every *.jsonl transcript of dir as `strata import
// --format claude-code` does, in file name order: each session a file
// holds, named "claude_" and the session's id.
func LoadClaudeCode(dir string) ([]Session, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []Session
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		ss, _, err := transcript.Read(transcript.ClaudeCode, f, transcript.Options{File: path})
		f.Close()
		if err != nil {
			return nil, err
		}
		for _, s := range ss {
			out = append(out, Session{ID: "claude_" + s.ID, Events: s.Events})
		}
	}
	return out, nil
}

// Kind says what work a session of the development data is: "support" for
// the airline customer-service agent (tau_*), "coding" for the others
// (aider, mini-swe-agent, SWE-agent, Claude Code).
func Kind(session string) string {
	if strings.HasPrefix(session, "tau_") {
		return "support"
	}
	return "coding"
}

// SessionSizes is what a replay of sessions found per session, in their
// order: the tokens of the whole session as a resumed context would carry
// it raw (store.Info.TailTokens with nothing compacted), and under each
// policy measured the L1 summaries committed and the tokens of the context
// resumed at the end (tier.TokensOfBytes of its text's length).
type SessionSizes struct {
	Tokens    []int
	Summaries [][]int // [policy][session]
	Context   [][]int // [policy][session]
}

// MeasureSizes replays sessions into new databases under dir, once with
// nothing compacted and once under each policy, with the extractive
// summarizer (which is never refused): appends of up to ReplayBatch
// events, each followed by the compactions it makes due. Where the
// boundaries fall does not depend on the batching.
func MeasureSizes(dir string, sessions []Session, policies []compaction.Policy) (SessionSizes, error) {
	var out SessionSizes
	raw, err := replayCount(filepath.Join(dir, "raw.db"), sessions, nil)
	if err != nil {
		return out, err
	}
	out.Tokens = raw.tail
	for i := range policies {
		r, err := replayCount(filepath.Join(dir, "policy.db"), sessions, &policies[i])
		if err != nil {
			return out, err
		}
		out.Summaries = append(out.Summaries, r.l1)
		out.Context = append(out.Context, r.context)
		if err := os.Remove(filepath.Join(dir, "policy.db")); err != nil {
			return out, err
		}
	}
	return out, nil
}

// counts is what replayCount found per session.
type counts struct {
	tail    []int // the uncompacted tail's tokens at the end
	l1      []int // L1 nodes committed
	context []int // tokens of the context resumed at the end
}

// replayCount replays sessions into a new database at path, compacting
// under policy unless it is nil.
func replayCount(path string, sessions []Session, policy *compaction.Policy) (c counts, err error) {
	p, err := OpenStrata(path, store.Options{NoSync: true})
	if err != nil {
		return c, err
	}
	defer func() {
		if cerr := p.Close(); err == nil {
			err = cerr
		}
	}()
	var comp *compaction.Compactor
	if policy != nil {
		if comp, err = compaction.NewCompactor(p.DB, compaction.Options{Summarizer: compaction.Extractive{}, Policy: *policy}); err != nil {
			return c, err
		}
	}
	c = counts{tail: make([]int, len(sessions)), l1: make([]int, len(sessions)), context: make([]int, len(sessions))}
	for i := range sessions {
		s := &sessions[i]
		for from := 0; from < len(s.Events); from += ReplayBatch {
			if _, err := p.DB.Append(s.ID, s.Events[from:min(from+ReplayBatch, len(s.Events))]...); err != nil {
				return c, err
			}
			if comp == nil {
				continue
			}
			rs, err := comp.Run(context.Background(), s.ID)
			if err != nil {
				return c, err
			}
			for _, r := range rs {
				if r.Kind == store.PlanSpan && r.Committed() {
					c.l1[i]++
				}
			}
		}
		info, err := p.DB.Info(s.ID)
		if err != nil {
			return c, err
		}
		rc, err := p.DB.Resume(s.ID, store.Latest)
		if err != nil {
			return c, err
		}
		c.tail[i], c.context[i] = info.TailTokens, tier.TokensOfBytes(len(rc.Text()))
	}
	return c, nil
}

// Quantiles returns the minimum, 25th percentile, median, 75th percentile
// and maximum of xs (nearest rank; all 0 for none).
func Quantiles(xs []int) [5]int {
	if len(xs) == 0 {
		return [5]int{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	at := func(q float64) int { return s[int(q*float64(len(s)-1)+0.5)] }
	return [5]int{s[0], at(0.25), at(0.5), at(0.75), s[len(s)-1]}
}
