package store

import (
	"strconv"
	"sync/atomic"
)

// testHook, when a test sets it, is called at named steps of every write:
// before each record is encoded ("encode:<type>", so a failure there stands
// for a failure at that step of an append or a commit) and after a write
// transaction's function returned, just before bbolt commits ("commit"),
// and when a write is handed to the group committer ("queued") or a commit
// starts waiting for company ("linger"); these two cannot fail. An error it returns fails the step. It is nil outside tests: the production
// cost is one atomic load per step. Tests set it only while no write is in
// flight, from a test that is not parallel: the hook is process-wide.
var testHook atomic.Pointer[func(step string) error]

// hook calls testHook, if set, with the step's name.
func hook(step string) error {
	if f := testHook.Load(); f != nil {
		return (*f)(step)
	}
	return nil
}

// hookEncode is hook for the encoding of a record of type t.
func hookEncode(t recType) error {
	if f := testHook.Load(); f != nil {
		return (*f)("encode:" + recTypeName(t))
	}
	return nil
}

func recTypeName(t recType) string {
	switch t {
	case recState:
		return "state"
	case recEvent:
		return "event"
	case recNode:
		return "node"
	case recMarker:
		return "marker"
	case recCheckpoint:
		return "checkpoint"
	case recAudit:
		return "audit"
	case recOpen:
		return "open"
	case recDisp:
		return "disp"
	case recConstraint:
		return "constraint"
	case recArtifact:
		return "artifact"
	case recRoot:
		return "root"
	case recIndex:
		return "index"
	case recRef:
		return "ref"
	}
	return strconv.Itoa(int(t))
}
