package boltfile

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/internal/errmark"
)

// guard runs fn, turning a panic — or, with SetPanicOnFault, a memory
// fault in bbolt's map of a damaged file — into ErrCorrupt instead of
// taking the host process down.
func guard(fn func() error) (err error) {
	restore := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(restore)
		if r := recover(); r != nil {
			err = errmark.Mark(errors.Newf("bbolt panicked: %v", r), backend.ErrCorrupt)
		}
	}()
	return fn()
}

// unguard is deferred by the transactions' methods, with the result of
// debug.SetPanicOnFault(true): a panic inside the method becomes a
// CorruptError naming the place in *err — unless it was raised by the
// caller's function (*inFn), which panics on as it would without the
// guard. A write transaction that recovered from a panic is broken: bbolt's
// state inside it is not known, and Update refuses to commit it.
func (t *tx) unguard(restore bool, err *error, inFn *bool, session, where string) {
	debug.SetPanicOnFault(restore)
	r := recover()
	if r == nil {
		return
	}
	if inFn != nil && *inFn {
		panic(r)
	}
	e := backend.Corrupt(session, where, nil, fmt.Errorf("bbolt panicked: %v", r))
	if t.btx.Writable() && t.broken == nil {
		t.broken = e
	}
	*err = e
}

// testHook, when a test of this package sets it, is called at named steps:
// "commit" after an Update's function returned and before bbolt commits (an
// error it returns is taken as the commit's own: a failed write or a
// failed fsync, as the test makes it); "create:meta" inside the
// transaction that writes a new database's meta record (an error fails it:
// a full disk); "create:synced" once the new database's temporary file is
// complete and synced, before it takes its place; "create:linked" after it
// did. It is nil outside tests: the cost is one atomic load per commit.
// A test that sets it is not parallel: the hook is the process's.
var testHook atomic.Pointer[func(step string) error]

func hook(step string) error {
	if f := testHook.Load(); f != nil {
		return (*f)(step)
	}
	return nil
}
