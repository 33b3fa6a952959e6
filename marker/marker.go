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
		}
	}
	for _, o := range req.Unresolved {
		if !claimedOpen[o.ID] {
			add(ClassClosure, o.ID, "open at seq %d (since seq %d) but not claimed UNRESOLVED", req.To, o.Seq)
		}
	}
	claimedResolved := map[string]bool{}
	resolvedInside := map[string]bool{}
	for _, id := range req.ResolvedInside {
		resolvedInside[id] = true
	}
	for _, id := range claims.Resolved {
		claimedResolved[id] = true
		if _, ok := open[id]; ok {
			add(ClassClosure, id, "claimed resolved but still open at seq %d", req.To)
		} else if !resolvedInside[id] {
			add(ClassClosure, id, "claimed resolved, but the span seq %d..%d resolves no such id", req.From, req.To)
		}
	}
	for _, id := range req.Resolved {
		if !claimedResolved[id] {
			add(ClassClosure, id, "opened before seq %d and resolved in the span, but not claimed resolved", req.From)
		}
	}

	// 2. Negative-fact retention, artifacts, constraints.
	checkSet(&fs, ClassRetention, req.Dispositions, claims.Dispositions,
		func(d tier.Disposition) string { return d.Key },
		func(want, got tier.Disposition) string {
			if got.State != want.State {
				return fmt.Sprintf("claimed %s, the span ends with %s", stateName(got.State), want.State)
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
	if k.IsDisposition() {
		return k.String()
	}
	return "no state"
}

func classRank(c string) int {
	for i, x := range Classes {
		if x == c {
			return i
		}
	}
	return len(Classes)
}
