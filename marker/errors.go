package marker

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/errors"
)

// ErrMarkerInvalid is returned (wrapped in an *InvalidError) when a node's
// claims do not carry the state its raw span implies, so that no marker may
// be committed for it.
var ErrMarkerInvalid = errors.New("marker: invalid")

// Reason classes of a refused marker, as they appear in the CLI's
// "reasons=" list and in stats.
const (
	ClassClosure    = "closure"
	ClassRetention  = "retention"
	ClassArtifact   = "artifact"
	ClassConstraint = "constraint"
	// ClassRequest is a user's request of the span not claimed, or one
	// claimed that the span does not hold.
	ClassRequest = "request"
	// ClassPlan is an open plan item not claimed, or claimed with another
	// status, or claimed but not open at the boundary.
	ClassPlan  = "plan"
	ClassDepth = "depth"
	// ClassSize is a summary over the size limits (narrative or claims):
	// refused, not trusted. The store checks it; Validate does not.
	ClassSize = "size"
	// ClassOutput is a summarizer answer that could not be used as a
	// summary at all (not JSON, cut short, over budget...): a refused
	// compaction like any other, recorded by the compactor through
	// store.DB.Refuse. Validate never reports it.
	ClassOutput = "output"
)

// Classes lists the reason classes in a fixed order.
var Classes = []string{ClassClosure, ClassRetention, ClassArtifact, ClassConstraint, ClassRequest, ClassPlan, ClassDepth, ClassSize, ClassOutput}

// Failure is one failed condition: its class, the id or key it is about,
// and what exactly is wrong.
type Failure struct {
	Class  string `msgpack:"c" json:"class"`
	Item   string `msgpack:"i" json:"item"`
	Detail string `msgpack:"d,omitempty" json:"detail,omitempty"`
}

// String returns "class:item".
func (f Failure) String() string { return f.Class + ":" + f.Item }

// InvalidError lists every failed condition of a refused marker, in a stable
// order. errors.Is(err, ErrMarkerInvalid) holds for it.
type InvalidError struct {
	Failures []Failure
}

// Error implements error, on one line.
func (e *InvalidError) Error() string {
	parts := make([]string, len(e.Failures))
	for i, f := range e.Failures {
		parts[i] = f.String()
		if f.Detail != "" {
			parts[i] += " (" + f.Detail + ")"
		}
	}
	return ErrMarkerInvalid.Error() + ": " + strings.Join(parts, ", ")
}

// Reasons returns the failures as "class:item,class:item", the form the CLI
// prints after "reasons=".
func (e *InvalidError) Reasons() string {
	parts := make([]string, len(e.Failures))
	for i, f := range e.Failures {
		parts[i] = f.String()
	}
	return strings.Join(parts, ",")
}

// Unwrap returns ErrMarkerInvalid.
func (e *InvalidError) Unwrap() error { return ErrMarkerInvalid }

// Format implements fmt.Formatter through errors.FormatError.
func (e *InvalidError) Format(s fmt.State, verb rune) { errors.FormatError(e, s, verb) }
