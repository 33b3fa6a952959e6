package marker

import (
	"fmt"
	"slices"

	"github.com/strata-go/strata/tier"
)

// Status is a marker's state: valid until a frame change makes it stale.
type Status = tier.Status

// Statuses, as tier defines them.
const (
	StatusValid   = tier.StatusValid
	StatusInvalid = tier.StatusInvalid
)

// Marker is a recovery marker: the promise that Node holds every fact needed
// to resume after Boundary. Its ID is its node's ID: a node gets exactly one
// marker, when it is committed.
type Marker struct {
	ID           uint64     `json:"id"`
	Node         uint64     `json:"node"`
	Depth        tier.Depth `json:"depth"`
	FrameVersion uint64     `json:"frame_version"` // frame version at emission
	Boundary     uint64     `json:"boundary"`      // the last seq the node covers
	Status       Status     `json:"status"`
	// Reason says why the marker was invalidated, and InvalidatedAt at which
	// frame version; both empty while it is valid.
	Reason        string `json:"reason,omitempty"`
	InvalidatedAt uint64 `json:"invalidated_at,omitempty"`
	// Unchecked says the marker was committed without validation
	// (store.DB.CommitUnchecked): it promises nothing. Resume of the
	// latest marker passes over it; only a resume that names it uses it.
	Unchecked bool `json:"unchecked,omitempty"`
}

// Frame is what the depth condition compares: the frame version, and the
// depth of the root slot that the node fills.
type Frame struct {
	Version   uint64
	RootDepth tier.Depth
}

// Validate checks a node's claims against the state its raw span implies
// (req, computed from raw events) and the frame it was planned against. It
// returns nil or an *InvalidError listing every failed condition.
func Validate(planned, current Frame, req *tier.Required, depth tier.Depth, claims *tier.Claims) error {
	var fs []Failure
	add := func(class, item, format string, args ...any) {
		fs = append(fs, Failure{Class: class, Item: item, Detail: fmt.Sprintf(format, args...)})
	}

	// 1. Closure.
	open := map[string]tier.Open{}
	for _, o := range req.Unresolved {
		open[o.ID] = o
	}
	claimedOpen := map[string]bool{}
	for _, o := range claims.Unresolved {
		if claimedOpen[o.ID] {
			add(ClassClosure, o.ID, "claimed UNRESOLVED more than once")
		}
		claimedOpen[o.ID] = true
		want, ok := open[o.ID]
		switch {
		case !ok:
			add(ClassClosure, o.ID, "claimed UNRESOLVED but not open at seq %d", req.To)
		case o.Kind != want.Kind:
			// A call is not a handle; and a claim with no kind would render
			// as a call and fail to encode as JSON.
			add(ClassClosure, o.ID, "claimed UNRESOLVED as %s, opened by %s at seq %d", o.Kind, want.Kind, want.Seq)
		case o.Seq != 0 && o.Seq != want.Seq:
			// Another invocation of the id: that one was resolved.
			add(ClassClosure, o.ID, "claimed UNRESOLVED as opened at seq %d, open since seq %d", o.Seq, want.Seq)
		}
	}
	for _, o := range req.Unresolved {
		if !claimedOpen[o.ID] {
			add(ClassClosure, o.ID, "open at seq %d (since seq %d) but not claimed UNRESOLVED", req.To, o.Seq)
		}
	}
	checkResolutions(&fs, ClassClosure, req.ResolvedInside, req.Resolved, claims.Resolved, open, req)

	// 2. Negative-fact retention: failed calls, dispositions; artifacts,
	// constraints.
	checkResolutions(&fs, ClassRetention, req.Failures, req.Failures, claims.Failures, nil, req)
	checkSet(&fs, ClassRetention, req.Dispositions, claims.Dispositions,
		func(d tier.Disposition) string { return d.Key },
		func(want, got tier.Disposition) string {
			if got.State != want.State {
				return fmt.Sprintf("claimed %s, the span ends with %s", stateName(got.State), tier.StateName(want.State))
			}
			if got.By != want.By {
				if want.By == "" {
					return fmt.Sprintf("the span names no replacement, claimed by %q", got.By)
				}
				return fmt.Sprintf("superseded by %q, claimed by %q", want.By, got.By)
			}
			return ""
		})
	checkSet(&fs, ClassArtifact, req.Artifacts, claims.Artifacts,
		func(a tier.Artifact) string { return a.Key },
		func(want, got tier.Artifact) string { return "" })
	checkSet(&fs, ClassConstraint, req.Constraints, claims.Constraints,
		func(c tier.Constraint) string { return c.Key },
		func(want, got tier.Constraint) string {
			if want.Withdrawn != got.Withdrawn {
				if want.Withdrawn {
					return "withdrawn in the span, claimed active"
				}
				return "active at the boundary, claimed withdrawn"
			}
			return ""
		})

	// The task and the user's words: every request the span lists, by
	// seq; the agent's plan: every open item, with its status.
	checkSet(&fs, ClassRequest, req.Requests, claims.Requests,
		func(r tier.Request) string { return fmt.Sprintf("request@%d", r.Seq) },
		func(want, got tier.Request) string { return "" })
	checkSet(&fs, ClassPlan, req.Plan, claims.Plan,
		func(p tier.PlanItem) string { return p.Key },
		func(want, got tier.PlanItem) string {
			if got.Status != want.Status {
				return fmt.Sprintf("claimed %q, the plan of seq %d says %q", got.Status, want.Seq, want.Status)
			}
			return ""
		})
	if claims.PlanAt != 0 && claims.PlanAt != req.PlanAt {
		add(ClassPlan, fmt.Sprintf("plan@%d", claims.PlanAt), "claimed the plan of seq %d, the newest plan call is at seq %d", claims.PlanAt, req.PlanAt)
	}

	// 3. Depth consistency.
	if planned.Version != current.Version {
		add(ClassDepth, fmt.Sprintf("frame/%d", current.Version), "planned against frame version %d, current is %d", planned.Version, current.Version)
	}
	if depth != current.RootDepth {
		add(ClassDepth, depth.String(), "node depth %d, the root it fills has depth %d", depth, current.RootDepth)
	}

	if len(fs) == 0 {
		return nil
	}
	slices.SortStableFunc(fs, func(a, b Failure) int {
		if c := classRank(a.Class) - classRank(b.Class); c != 0 {
			return c
		}
		switch {
		case a.Item < b.Item:
			return -1
		case a.Item > b.Item:
			return 1
		}
		return 0
	})
	return &InvalidError{Failures: fs}
}

// checkSet reports every required item missing from the claims or claimed
// wrongly (per mismatch), and every claimed item the span does not imply.
func checkSet[V any](fs *[]Failure, class string, want, got []V, key func(V) string, mismatch func(want, got V) string) {
	claimed := make(map[string]V, len(got))
	for _, g := range got {
		k := key(g)
		if _, twice := claimed[k]; twice {
			// Two states for one key (normalized claims hold no exact
			// duplicates): one of them is false.
			*fs = append(*fs, Failure{Class: class, Item: k, Detail: "claimed more than once"})
		}
		claimed[k] = g
	}
	required := make(map[string]bool, len(want))
	for _, w := range want {
		k := key(w)
		required[k] = true
		g, ok := claimed[k]
		if !ok {
			*fs = append(*fs, Failure{Class: class, Item: k, Detail: "not claimed"})
			continue
		}
		if d := mismatch(w, g); d != "" {
			*fs = append(*fs, Failure{Class: class, Item: k, Detail: d})
		}
	}
	for _, g := range got {
		if k := key(g); !required[k] {
			*fs = append(*fs, Failure{Class: class, Item: k, Detail: "claimed, but the span does not imply it"})
		}
	}
}

func stateName(k tier.Kind) string {
	if k.IsDisposition() || k == tier.StateSucceeded {
		return tier.StateName(k)
	}
	return "no state"
}

// checkResolutions checks claimed invocations (resolved, or failed) against
// those the span resolved: each of required must be claimed, and each claim
// must name one of allowed — by id, and by the seq that opened it where the
// claim gives one. For resolved claims, open (the ids open at the boundary)
// names what a wrong claim of a still-open call means.
func checkResolutions(fs *[]Failure, class string, allowed, required, claimed []tier.Resolution, open map[string]tier.Open, req *tier.Required) {
	noun := "resolved"
	if class == ClassRetention {
		noun = "failed"
	}
	matched := make([]bool, len(required))
	for i, c := range claimed {
		for j := range claimed[:i] {
			if claimed[j].ID == c.ID && claimed[j].Seq == c.Seq {
				*fs = append(*fs, Failure{Class: class, Item: Invocation(c), Detail: "claimed " + noun + " more than once"})
			}
		}
		ok := false
		for j, r := range required {
			if !matched[j] && r.Matches(c) {
				matched[j], ok = true, true
				break
			}
		}
		for _, r := range allowed {
			ok = ok || r.Matches(c)
		}
		if ok {
			continue
		}
		detail := fmt.Sprintf("claimed resolved, but the span seq %d..%d resolves no such call", req.From, req.To)
		if class == ClassRetention {
			detail = fmt.Sprintf("claimed failed, but no such call failed in the span seq %d..%d", req.From, req.To)
		}
		if o, still := open[c.ID]; still && (c.Seq == 0 || c.Seq == o.Seq) {
			detail = fmt.Sprintf("claimed resolved but still open at seq %d", req.To)
		}
		*fs = append(*fs, Failure{Class: class, Item: Invocation(c), Detail: detail})
	}
	for j, r := range required {
		if matched[j] {
			continue
		}
		switch class {
		case ClassClosure:
			*fs = append(*fs, Failure{Class: class, Item: Invocation(r), Detail: fmt.Sprintf("opened before seq %d and resolved in the span, but not claimed resolved", req.From)})
		default:
			*fs = append(*fs, Failure{Class: class, Item: Invocation(r), Detail: fmt.Sprintf("failed at seq %d, but not claimed", r.At)})
		}
	}
}

// Invocation names one invocation of an id as a Failure's item does:
// "c1@12" (opened at seq 12), or "c1" for a claim that gives no seq.
func Invocation(r tier.Resolution) string {
	if r.Seq == 0 {
		return r.ID
	}
	return fmt.Sprintf("%s@%d", r.ID, r.Seq)
}

func classRank(c string) int {
	for i, x := range Classes {
		if x == c {
			return i
		}
	}
	return len(Classes)
}

// Invalidate marks a valid marker invalid, at frame version version and
// for the reason why: its node stopped being a root (folded, digested or
// re-compacted), so the promise it made about the frame no longer holds. It
// reports whether it changed m; an invalid marker stays as it was, with its
// first reason.
func (m *Marker) Invalidate(why string, version uint64) bool {
	if m.Status != StatusValid {
		return false
	}
	m.Status, m.Reason, m.InvalidatedAt = StatusInvalid, why, version
	return true
}
