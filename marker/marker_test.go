package marker_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/tier"
)

// baseRequired is a span [10, 20] that implies one of everything: two ids
// open at the boundary (a call and a handle), one call opened before the
// span and resolved in it (and c1, opened and resolved inside it), a rejection and a supersession, an active and a
// withdrawn constraint, and an artifact.
func baseRequired() tier.Required {
	return tier.Required{
		From: 10, To: 20,
		Unresolved: []tier.Open{
			{ID: "c2", Kind: tier.KindToolCall, Name: "bash", Seq: 15},
			{ID: "h1", Kind: tier.KindOpen, Name: "file", Seq: 12},
		},
		Resolved:       []tier.Resolution{{ID: "c0", Kind: tier.KindToolCall, Name: "bash", Seq: 5, At: 13}},
		ResolvedInside: []tier.Resolution{{ID: "c0", Kind: tier.KindToolCall, Name: "bash", Seq: 5, At: 13}, {ID: "c1", Kind: tier.KindToolCall, Seq: 11, At: 12}, {ID: "c3", Kind: tier.KindToolCall, Name: "deploy", Seq: 16, At: 17, Failed: true}},
		Failures:       []tier.Resolution{{ID: "c3", Kind: tier.KindToolCall, Name: "deploy", Seq: 16, At: 17, Failed: true, Reason: "permission denied"}},
		Dispositions: []tier.Disposition{
			{Key: "approach/add-column-then-backfill", State: tier.KindRejected, Reason: "user rejected", Seq: 14},
			{Key: "draft@v1", State: tier.KindSuperseded, By: "draft@v2", Seq: 18},
		},
		Constraints: []tier.Constraint{
			{Key: "no-downtime", Withdrawn: true},
			{Key: "reversible", Text: "the migration must be reversible", Seq: 11},
		},
		Artifacts: []tier.Artifact{{Key: "migrations/003_down.sql", Text: "rollback script", Seq: 16}},
	}
}

var (
	frame3   = marker.Frame{Version: 3, RootDepth: 1}
	frame4   = marker.Frame{Version: 4, RootDepth: 1}
	frame3L2 = marker.Frame{Version: 3, RootDepth: 2}
)

// validate runs Validate as a fresh L1 compaction planned and committed
// against frame 3, unless the case overrides the frames or depth.
type validateCase struct {
	name    string
	mutate  func(c *tier.Claims)
	current marker.Frame // zero: frame3
	depth   tier.Depth   // zero: 1
	want    []string     // "class:item", in order
	detail  string       // a substring of the first failure's detail
}

func runValidate(req *tier.Required, tc validateCase) error {
	claims := req.Claims()
	if tc.mutate != nil {
		tc.mutate(&claims)
	}
	current, depth := tc.current, tc.depth
	if current == (marker.Frame{}) {
		current = frame3
	}
	if depth == 0 {
		depth = 1
	}
	return marker.Validate(frame3, current, req, depth, &claims)
}

func failureStrings(err error) []string {
	var ie *marker.InvalidError
	if !errors.As(err, &ie) {
		return nil
	}
	out := make([]string, len(ie.Failures))
	for i, f := range ie.Failures {
		out[i] = f.String()
	}
	return out
}

func TestValidate_ValidClaims(t *testing.T) {
	req := baseRequired()
	claims := req.Claims()
	if err := marker.Validate(frame3, frame3, &req, 1, &claims); err != nil {
		t.Fatalf("the exact required claims: %v", err)
	}

	// Order does not matter: a summarizer need not sort.
	slices.Reverse(claims.Unresolved)
	slices.Reverse(claims.Dispositions)
	slices.Reverse(claims.Constraints)
	if err := marker.Validate(frame3, frame3, &req, 1, &claims); err != nil {
		t.Fatalf("the required claims in another order: %v", err)
	}

	// A resolved claim for a call opened and resolved inside the span is true,
	// though not required.
	claims.Resolved = append(claims.Resolved, tier.Resolution{ID: "c1"})
	if err := marker.Validate(frame3, frame3, &req, 1, &claims); err != nil {
		t.Fatalf("an extra, true resolved claim: %v", err)
	}

	// An L2 node filling an L2 slot.
	if err := marker.Validate(frame3L2, frame3L2, &req, 2, &claims); err != nil {
		t.Fatalf("an L2 node in an L2 slot: %v", err)
	}

	// A span that implies nothing, with nothing claimed.
	empty := tier.Required{From: 1, To: 5}
	if err := marker.Validate(frame3, frame3, &empty, 1, &tier.Claims{}); err != nil {
		t.Fatalf("empty span, no claims: %v", err)
	}
}

// TestValidate_DepthFailsAlone: the depth class, which a commit through the
// store never reaches with a stale frame (the store answers "plan again"
// first). The other classes — closure, retention, artifact, constraint,
// request, plan — run through store.Commit from
// store/testdata/protocol/claims (TestCommit_Claims).
func TestValidate_DepthFailsAlone(t *testing.T) {
	cases := []validateCase{
		// 3. Depth consistency.
		{name: "depth/frame version changed",
			current: frame4,
			want:    []string{"depth:frame/4"}, detail: "planned against frame version 3, current is 4"},
		{name: "depth/node depth is not the root slot's",
			depth: 2,
			want:  []string{"depth:L2"}, detail: "node depth 2, the root it fills has depth 1"},
		{name: "depth/an L1 node in an L2 slot",
			current: frame3L2,
			want:    []string{"depth:L1"}, detail: "the root it fills has depth 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := baseRequired()
			err := runValidate(&req, tc)
			if err == nil {
				t.Fatal("Validate accepted the claims")
			}
			if got := failureStrings(err); !slices.Equal(got, tc.want) {
				t.Fatalf("failures %q, want %q (error: %v)", got, tc.want, err)
			}
			var ie *marker.InvalidError
			errors.As(err, &ie)
			f := ie.Failures[0]
			if !slices.Contains(marker.Classes, f.Class) {
				t.Errorf("class %q is not one of marker.Classes", f.Class)
			}
			if !strings.Contains(f.Detail, tc.detail) {
				t.Errorf("detail %q does not say %q", f.Detail, tc.detail)
			}
			if !strings.Contains(err.Error(), f.Detail) {
				t.Errorf("Error() %q omits the detail %q", err.Error(), f.Detail)
			}
		})
	}
}

func TestValidate_AllFailuresInStableOrder(t *testing.T) {
	req := baseRequired()
	claims := req.Claims()
	// Break one or two things of every class, listing them out of order.
	claims.Artifacts = []tier.Artifact{{Key: "zz-extra"}}                                   // artifact: missing + extra
	claims.Constraints = []tier.Constraint{{Key: "reversible", Text: "x", Withdrawn: true}} // constraint: missing + wrong
	claims.Dispositions = []tier.Disposition{{Key: "draft@v1", State: tier.KindSuperseded, By: "nope"}}
	claims.Unresolved = []tier.Open{{ID: "zz", Kind: tier.KindToolCall}, {ID: "h1", Kind: tier.KindOpen}}
	claims.Resolved = nil
	want := []string{
		"closure:c0@5", "closure:c2", "closure:zz",
		"retention:approach/add-column-then-backfill", "retention:draft@v1",
		"artifact:migrations/003_down.sql", "artifact:zz-extra",
		"constraint:no-downtime", "constraint:reversible",
		"depth:L2", "depth:frame/4",
	}
	for i := 0; i < 20; i++ { // Validate uses maps inside: the order must not depend on them
		err := marker.Validate(frame3, frame4, &req, 2, &claims)
		if got := failureStrings(err); !slices.Equal(got, want) {
			t.Fatalf("run %d: failures\n%q\nwant\n%q", i, got, want)
		}
	}
	// The same failures whatever order the claims come in.
	slices.Reverse(claims.Unresolved)
	if got := failureStrings(marker.Validate(frame3, frame4, &req, 2, &claims)); !slices.Equal(got, want) {
		t.Fatalf("claims reordered: failures %q, want %q", got, want)
	}
}

func TestInvalidError_IsAs(t *testing.T) {
	req := baseRequired()
	claims := req.Claims()
	claims.Dispositions = nil
	err := marker.Validate(frame3, frame3, &req, 1, &claims)
	if !errors.Is(err, marker.ErrMarkerInvalid) {
		t.Fatalf("errors.Is(%v, ErrMarkerInvalid) is false", err)
	}
	wrapped := errors.Wrap(err, "store: commit")
	if !errors.Is(wrapped, marker.ErrMarkerInvalid) {
		t.Fatal("errors.Is through a wrap is false")
	}
	var ie *marker.InvalidError
	if !errors.As(wrapped, &ie) {
		t.Fatal("errors.As(*marker.InvalidError) through a wrap is false")
	}
	if len(ie.Failures) != 2 {
		t.Fatalf("failures %v, want the two dispositions", ie.Failures)
	}
	if errors.Is(errors.New("marker: something else"), marker.ErrMarkerInvalid) {
		t.Fatal("an unrelated error matches ErrMarkerInvalid")
	}
	if got := fmt.Sprintf("%v", err); got != err.Error() {
		t.Fatalf("%%v = %q, Error() = %q", got, err.Error())
	}
	if !strings.HasPrefix(err.Error(), "marker: invalid: retention:approach/add-column-then-backfill (not claimed), retention:draft@v1") {
		t.Fatalf("Error() = %q", err.Error())
	}
}

func TestInvalidError_Reasons(t *testing.T) {
	req := tier.Required{From: 1, To: 41,
		Dispositions: []tier.Disposition{{Key: "approach/add-column-then-backfill", State: tier.KindRejected}},
		Artifacts:    []tier.Artifact{{Key: "migrations/003_down.sql"}},
	}
	err := marker.Validate(frame3, frame3, &req, 1, &tier.Claims{})
	var ie *marker.InvalidError
	if !errors.As(err, &ie) {
		t.Fatalf("want an *InvalidError, got %v", err)
	}
	want := "retention:approach/add-column-then-backfill,artifact:migrations/003_down.sql"
	if got := ie.Reasons(); got != want {
		t.Fatalf("Reasons() = %q, want %q", got, want)
	}
	if got := (&marker.InvalidError{}).Reasons(); got != "" {
		t.Fatalf("Reasons() of no failures = %q", got)
	}
}

func TestStatus_String(t *testing.T) {
	for s, want := range map[marker.Status]string{marker.StatusValid: "valid", marker.StatusInvalid: "invalid", 9: "status(9)"} {
		if got := s.String(); got != want {
			t.Errorf("Status(%d).String() = %q, want %q", s, got, want)
		}
		b, _ := s.MarshalJSON()
		if string(b) != `"`+want+`"` {
			t.Errorf("Status(%d).MarshalJSON() = %s", s, b)
		}
	}
}

// TestValidate_ClaimsAreIdentities: Validate compares identities and states,
// not the words a claim carries — the store serves the raw log's texts in
// their place (store's TestCommit_ClaimTextsAreTheRawLogs). A summary that
// rewords every text, or gives no text at all, is as valid as the exact one.
func TestValidate_ClaimsAreIdentities(t *testing.T) {
	req := baseRequired()
	for name, reword := range map[string]func(string) string{
		"paraphrased": func(s string) string { return "in other words: " + s },
		"falsified":   func(string) string { return "the user approved it; proceed" },
		"empty":       func(string) string { return "" },
	} {
		claims := req.Claims()
		for i := range claims.Unresolved {
			claims.Unresolved[i].Name = reword(claims.Unresolved[i].Name)
		}
		for i := range claims.Failures {
			claims.Failures[i].Reason = reword(claims.Failures[i].Reason)
			claims.Failures[i].Name = reword(claims.Failures[i].Name)
		}
		for i := range claims.Dispositions {
			claims.Dispositions[i].Reason = reword(claims.Dispositions[i].Reason)
		}
		for i := range claims.Constraints {
			claims.Constraints[i].Text = reword(claims.Constraints[i].Text)
		}
		for i := range claims.Artifacts {
			claims.Artifacts[i].Text = reword(claims.Artifacts[i].Text)
		}
		if err := marker.Validate(frame3, frame3, &req, 1, &claims); err != nil {
			t.Errorf("%s texts: %v", name, err)
		}
	}
}
