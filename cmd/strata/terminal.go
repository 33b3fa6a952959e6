package main

import (
	"io"
	"os"
)

// isTerminal reports whether w is a terminal: progress is for a person
// watching, never for a pipe or a file, and binary output is never for a
// screen. A character device that is no terminal (/dev/null) is not one.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminalFile(f)
}
