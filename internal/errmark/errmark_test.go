package errmark_test

import (
	stderrors "errors"
	"fmt"
	"io/fs"
	"strings"
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

// %+v prints what cockroachdb/errors prints for its own errors: the
// cause's stack, also under another errors.Wrap.
func TestMark_Formatting(t *testing.T) {
	err := errmark.Mark(errors.Wrap(fs.ErrClosed, "commit"), errSentinel)
	if got := fmt.Sprintf("%v", err); got != "commit: file already closed" {
		t.Errorf("%%v = %q", got)
	}
	for _, e := range []error{err, errors.Wrap(err, "outer")} {
		if got := fmt.Sprintf("%+v", e); !strings.Contains(got, "errmark_test.go") {
			t.Errorf("%%+v has no stack frame of the wrapped error:\n%s", got)
		}
	}
	if hs := errors.GetAllHints(errmark.Mark(errors.WithHint(errSentinel, "do this"), errSentinel)); len(hs) != 1 {
		t.Errorf("hints %v", hs)
	}
}
