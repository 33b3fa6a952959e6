package errmark_test

import (
	stderrors "errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/internal/errmark"
)

var errSentinel = errors.New("sentinel")

// Both errors packages see the mark and what the error wraps, and the
// message is the error's own.
func TestMark(t *testing.T) {
	cause := fmt.Errorf("opening: %w", fs.ErrNotExist)
	err := errmark.Mark(cause, errSentinel)
	for name, is := range map[string]func(error, error) bool{"std": stderrors.Is, "cockroachdb": errors.Is} {
		if !is(err, errSentinel) {
			t.Errorf("%s: errors.Is(err, sentinel) is false", name)
		}
		if !is(err, fs.ErrNotExist) {
			t.Errorf("%s: errors.Is(err, the wrapped cause) is false", name)
		}
		if is(err, fs.ErrPermission) {
			t.Errorf("%s: errors.Is(err, another error) is true", name)
		}
		if wrapped := errors.Wrap(err, "outer"); !is(wrapped, errSentinel) {
			t.Errorf("%s: errors.Is(wrapped err, sentinel) is false", name)
		}
	}
	if err.Error() != cause.Error() {
		t.Errorf("message %q, want %q", err.Error(), cause.Error())
	}
	if errmark.Mark(nil, errSentinel) != nil {
		t.Error("Mark(nil) is not nil")
	}
}
