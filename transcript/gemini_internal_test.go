package transcript

import "testing"

// shellFailed reads a failure only from the exact layout Gemini CLI
// 0.61.0's shell tool writes: a failure's Exit Code field, or the Signal
// field of a command a signal terminated, followed by nothing but the
// tool's later fields, in its order, once each (and what a command printed
// before the tool's fields is output, whatever it looks like). What a command's own
// output can and cannot make of it: it cannot hide a failure, nor make one
// by printing a field anywhere but at its very end; printed as its last
// line, followed by the fields the tool writes after a success, it reads
// as a failure.
func TestShellFailed(t *testing.T) {
	wrap := func(s string) string { return untrustedOpen + s + untrustedClose }
	for _, tc := range []struct {
		name, text string
		failed     bool
	}{
		{"the real run's failure", wrap("Output: ls: cannot access '/nonexistent/strata-dir': No such file or directory\nExit Code: 2\nProcess Group PGID: 29034"), true},
		{"every field the tool writes", wrap("Output: x\nError: spawn failed\nExit Code: 137\nSignal: SIGKILL\nBackground PIDs: 12, 13\nProcess Group PGID: 11"), true},
		{"no output", wrap("Output: (empty)\nExit Code: 1\nProcess Group PGID: 7"), true},
		{"bare, as an older chat", "Output: x\nExit Code: 1", true},
		{"terminated by a signal", wrap("Output: partial\nSignal: SIGTERM\nProcess Group PGID: 7"), true},
		{"terminated by a signal, by number", wrap("Output: partial\nSignal: 9\nBackground PIDs: 8\nProcess Group PGID: 7"), true},
		{"a success", wrap("Output: ok\nProcess Group PGID: 7"), false},
		{"the field printed inside the output", wrap("Output: echo says\nExit Code: 1\nthat was just text\nProcess Group PGID: 4243"), false},
		{"a signal printed inside the output", wrap("Output: trap says\nSignal: SIGINT\nthat was just text\nProcess Group PGID: 4243"), false},
		{"the field printed on the output's first line", wrap("Output: Exit Code: 1\nProcess Group PGID: 7"), false},
		{"a signal on the output's first line", wrap("Output: Signal: SIGHUP\nProcess Group PGID: 7"), false},
		{"a failure after a printed field", wrap("Output: a\nExit Code: 9\nExit Code: 2\nProcess Group PGID: 7"), true},
		{"a failure after printed later fields", wrap("Output: a\nExit Code: 9\nProcess Group PGID: 5\nExit Code: 2\nProcess Group PGID: 7"), true},
		{"a printed field and PGID before the tool's PGID", wrap("Output: a\nExit Code: 9\nProcess Group PGID: 5\nProcess Group PGID: 7"), false},
		{"the fields out of the tool's order", wrap("Output: a\nExit Code: 1\nProcess Group PGID: 5\nBackground PIDs: 8"), false},
		{"a Signal field last: the tool's, whatever the output printed", wrap("Output: a\nExit Code: 1\nProcess Group PGID: 5\nSignal: SIGTERM"), true},
		{"a printed Signal line, then the tool's failure", wrap("Output: a\nSignal: SIGTERM\nExit Code: 1\nProcess Group PGID: 5"), true},
		{"a printed Signal line, then the tool's signal", wrap("Output: a\nSignal: SIGTERM\nSignal: SIGKILL\nProcess Group PGID: 5"), true},
		{"Exit Code 0, which the tool never writes", wrap("Output: a\nExit Code: 0\nProcess Group PGID: 5"), false},
		{"a printed field, then the wrapper's escaped closing tag", wrap("Output: a\nExit Code: 3\n&lt;/untrusted_context&gt;\nProcess Group PGID: 5"), false},
		{"text after the wrapper", wrap("Output: a\nExit Code: 3") + "\nmore", false},
		{"a space after the code", wrap("Output: a\nExit Code: 3 \nProcess Group PGID: 5"), false},
		{"a space after the signal", wrap("Output: a\nSignal: SIGTERM \nProcess Group PGID: 5"), false},
		{"not the tool's layout", wrap("Result: a\nExit Code: 3"), false},
		// The one forgery the layout allows: a command that exited 0 and
		// printed the field as its output's last line.
		{"printed as the output's last line, then a success's fields", wrap("Output: all good\nExit Code: 1\nProcess Group PGID: 7"), true},
		{"printed with a Signal line, then a success's fields", wrap("Output: all good\nExit Code: 1\nSignal: SIGTERM\nProcess Group PGID: 7"), true},
		{"a signal printed as the last line, then a success's fields", wrap("Output: all good\nSignal: SIGTERM\nProcess Group PGID: 7"), true},
	} {
		if got := shellFailed(tc.text); got != tc.failed {
			t.Errorf("%s: shellFailed(%q) = %v, want %v", tc.name, tc.text, got, tc.failed)
		}
	}
}
