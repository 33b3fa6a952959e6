// Package hooktest holds what the tests of the companion's adapters share:
// running a hook input, and reading the context a hook's output adds.
package hooktest

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/strata-go/strata/companion"
)

// Run runs in on h and fails the test on an error.
func Run(t testing.TB, h *companion.Hook, in companion.Input) *companion.Result {
	t.Helper()
	r, err := h.Run(context.Background(), in)
	if err != nil {
		t.Fatalf("%s: %v", in.HookEventName, err)
	}
	return r
}

// AdditionalContext decodes a hook's output adding text to the agent's
// context after event (companion.AdditionalContext), failing the test
// unless the output is exactly that object for event.
func AdditionalContext(t testing.TB, out []byte, event string) string {
	t.Helper()
	var o struct {
		HookSpecificOutput struct {
			HookEventName     string `json:"hookEventName"`
			AdditionalContext string `json:"additionalContext"`
		} `json:"hookSpecificOutput"`
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil || o.HookSpecificOutput.HookEventName != event {
		t.Fatalf("output %s: %v; want %s's additionalContext", out, err, event)
	}
	return o.HookSpecificOutput.AdditionalContext
}
