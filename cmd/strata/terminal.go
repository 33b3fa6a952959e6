package main

import (
	"io"
	"os"

	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal: progress is for a person
// watching, never for a pipe or a file, and binary output is never for a
// screen. A character device that is no terminal (/dev/null) is not one:
// golang.org/x/term asks for terminal attributes on every system it runs
// on (the console mode on Windows).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
