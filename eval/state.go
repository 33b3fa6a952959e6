package eval

import (
	"slices"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/tier"
)

// Loss counts the facts a resumed context lacks, per class (see the package
// documentation for the exact rule).
type Loss struct {
	Open         int `json:"open"`
	Failures     int `json:"failures"`
	Dispositions int `json:"dispositions"`
	Constraints  int `json:"constraints"`
	Artifacts    int `json:"artifacts"`
}

// Total returns the facts lost in every class.
func (l Loss) Total() int { return l.Open + l.Failures + l.Dispositions + l.Constraints + l.Artifacts }

func (l *Loss) add(o Loss) {
	l.Open += o.Open
	l.Failures += o.Failures
	l.Dispositions += o.Dispositions
	l.Constraints += o.Constraints
	l.Artifacts += o.Artifacts
}

// Truth is the state the raw log implies at its head, kept as events are
// appended, independently of the store: the ledger, and every call or
// resource whose result failed, by invocation ("c1@12": c1, opened at seq
// 12), which the ledger does not keep.
type Truth struct {
	Ledger *tier.Ledger
	Failed map[string]bool
}

// NewTruth returns the truth of an empty log.
func NewTruth() *Truth { return &Truth{Ledger: tier.NewLedger(), Failed: map[string]bool{}} }

// Apply applies the log's next event (seq and turn assigned), setting its
// Opener as the store does.
func (t *Truth) Apply(e *tier.Event) error {
	if err := t.Ledger.Apply(e); err != nil {
		return err
	}
	if e.Kind.Resolves() && e.Failed {
		t.Failed[failureKey(e.ID, e.Opener)] = true
	}
	return nil
}

// failureKey names a failed invocation as marker.Invocation does.
func failureKey(id string, opened uint64) string {
	return marker.Invocation(tier.Resolution{ID: id, Seq: opened})
}

// view is the state a context shows: what its claims and raw events say.
type view struct {
	open   map[string]tier.Kind
	failed map[string]bool
	disp   map[string]tier.Disposition
	constr map[string]bool // active
	art    map[string]bool
}

// contextView reads ctx's structured content: the nodes' claims in order,
// then the raw events in order, later entries overriding earlier ones.
func contextView(ctx *checkpoint.Context) *view {
	v := &view{open: map[string]tier.Kind{}, failed: map[string]bool{}, disp: map[string]tier.Disposition{},
		constr: map[string]bool{}, art: map[string]bool{}}
	for i := range ctx.Nodes {
		c := &ctx.Nodes[i].Claims
		// Resolutions first: an id resolved in the span and open again at
		// its end is both.
		for _, r := range c.Resolved {
			delete(v.open, r.ID)
		}
		for _, o := range c.Unresolved {
			v.open[o.ID] = o.Kind
		}
		for _, f := range c.Failures {
			v.failed[failureKey(f.ID, f.Seq)] = true
		}
		for _, d := range c.Dispositions {
			v.disp[d.Key] = d
		}
		for _, x := range c.Constraints {
			if x.Withdrawn {
				delete(v.constr, x.Key)
			} else {
				v.constr[x.Key] = true
			}
		}
		for _, a := range c.Artifacts {
			v.art[a.Key] = true
		}
	}
	for i := range ctx.Events {
		e := &ctx.Events[i]
		switch {
		case e.Kind.Opens():
			v.open[e.ID] = e.Kind
		case e.Kind.Resolves():
			delete(v.open, e.ID)
			if e.Failed {
				v.failed[failureKey(e.ID, e.Opener)] = true
			}
			switch {
			case e.Kind != tier.KindToolResult || e.Key == "":
			case e.Failed:
				v.disp[e.Key] = tier.Disposition{Key: e.Key, State: tier.KindFailed}
			case v.disp[e.Key].State == tier.KindFailed:
				v.disp[e.Key] = tier.Disposition{Key: e.Key, State: tier.StateSucceeded}
			}
		case e.Kind.IsDisposition():
			v.disp[e.Key] = tier.Disposition{Key: e.Key, State: e.Kind, By: e.By}
		case e.Kind == tier.KindConstraint:
			v.constr[e.Key] = true
		case e.Kind == tier.KindWithdrawn:
			delete(v.constr, e.Key)
		case e.Kind == tier.KindArtifact:
			v.art[e.Key] = true
		}
	}
	return v
}

// StateLoss compares truth, the state at the context's head replayed from
// the raw log, with what ctx shows, and returns the facts lost per class
// and each of them as "class:id" in a stable order.
func StateLoss(t *Truth, ctx *checkpoint.Context) (Loss, []string) {
	truth := t.Ledger
	v := contextView(ctx)
	var l Loss
	var items []string
	lost := func(n *int, class, item string) {
		*n++
		items = append(items, class+":"+item)
	}
	for id, o := range truth.Open {
		if k, ok := v.open[id]; !ok || k != o.Kind {
			lost(&l.Open, "open", id)
		}
	}
	for id := range v.open {
		if _, ok := truth.Open[id]; !ok {
			lost(&l.Open, "open", id)
		}
	}
	for k := range t.Failed {
		if !v.failed[k] {
			lost(&l.Failures, "failure", k)
		}
	}
	for k := range v.failed {
		if !t.Failed[k] {
			lost(&l.Failures, "failure", k)
		}
	}
	for k, d := range truth.Dispositions {
		if x, ok := v.disp[k]; !ok || x.State != d.State || x.By != d.By {
			lost(&l.Dispositions, "disposition", k)
		}
	}
	for k := range v.disp {
		if _, ok := truth.Dispositions[k]; !ok {
			lost(&l.Dispositions, "disposition", k)
		}
	}
	for k := range truth.Constraints {
		if !v.constr[k] {
			lost(&l.Constraints, "constraint", k)
		}
	}
	for k := range v.constr {
		if _, ok := truth.Constraints[k]; !ok {
			lost(&l.Constraints, "constraint", k)
		}
	}
	for k := range truth.Artifacts {
		if !v.art[k] {
			lost(&l.Artifacts, "artifact", k)
		}
	}
	for k := range v.art {
		if _, ok := truth.Artifacts[k]; !ok {
			lost(&l.Artifacts, "artifact", k)
		}
	}
	slices.Sort(items)
	return l, items
}
