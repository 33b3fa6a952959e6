package tier

import "slices"

// The copies below share no memory with what they copy: every list is a
// list of its own, and so is every list inside an element. The store hands
// them to summarizers and callers, so that no edit in place of what they
// were handed reaches the facts the store validates, commits or serves.
// TestClone_SharesNothing fills every field of each type, by reflection,
// and checks that editing the original in place leaves the copy as it was:
// a field added to any of them is covered by that test.

// Clone returns a copy of r that shares no memory with it.
func (r *Required) Clone() Required {
	c := *r
	c.Unresolved = slices.Clone(r.Unresolved)
	c.Resolved = slices.Clone(r.Resolved)
	c.ResolvedInside = slices.Clone(r.ResolvedInside)
	c.Failures = slices.Clone(r.Failures)
	c.Dispositions = slices.Clone(r.Dispositions)
	c.Constraints = slices.Clone(r.Constraints)
	c.Artifacts = slices.Clone(r.Artifacts)
	c.Requests = slices.Clone(r.Requests)
	c.Plan = slices.Clone(r.Plan)
	c.Successes = slices.Clone(r.Successes)
	c.Rejections = slices.Clone(r.Rejections)
	return c
}

// Clone returns a copy of c that shares no memory with it.
func (c *Claims) Clone() Claims {
	o := *c
	o.Resolved = slices.Clone(c.Resolved)
	o.Unresolved = slices.Clone(c.Unresolved)
	o.Failures = slices.Clone(c.Failures)
	o.Dispositions = slices.Clone(c.Dispositions)
	o.Constraints = slices.Clone(c.Constraints)
	o.Artifacts = slices.Clone(c.Artifacts)
	o.Requests = slices.Clone(c.Requests)
	o.Plan = slices.Clone(c.Plan)
	return o
}

// Clone returns a copy of n that shares no memory with it.
func (n *Node) Clone() Node {
	o := *n
	o.Children = slices.Clone(n.Children)
	o.Claims = n.Claims.Clone()
	o.SpanHash = slices.Clone(n.SpanHash)
	return o
}

// CloneNodes returns a copy of nodes that shares no memory with it.
func CloneNodes(nodes []Node) []Node {
	if nodes == nil {
		return nil
	}
	out := make([]Node, len(nodes))
	for i := range nodes {
		out[i] = nodes[i].Clone()
	}
	return out
}

// CloneEvents returns a copy of events that shares no memory with it.
func CloneEvents(events []Event) []Event { return slices.Clone(events) }
