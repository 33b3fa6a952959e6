package transcript

import "testing"

// shellExit reads the exit code only from the exact layout Gemini CLI
// 0.61.0's shell tool writes: a failure's Exit Code field followed by
// nothing but the tool's later fields, in its order, once each. What a
// command's own output can and cannot make of it: it cannot hide a
// failure or change its code, nor make one by printing the field
// anywhere but at its very end; printed as its last line, followed by the
// fields the tool writes after a success, it reads as a failure.
func TestShellExit(t *testing.T) {
	wrap := func(s string) string { return untrustedOpen + s + untrustedClose }
	for _, tc := range []struct {
		name, text string
		code       int // 0: not read as a failure
	}{
		{"the real run's failure", wrap("Output: ls: cannot access '/nonexistent/strata-dir': No such file or directory\nExit Code: 2\nProcess Group PGID: 29034"), 2},
		{"every field the tool writes", wrap("Output: x\nError: spawn failed\nExit Code: 137\nSignal: SIGKILL\nBackground PIDs: 12, 13\nProcess Group PGID: 11"), 137},
		{"no output", wrap("Output: (empty)\nExit Code: 1\nProcess Group PGID: 7"), 1},
		{"bare, as an older chat", "Output: x\nExit Code: 1", 1},
		{"a success", wrap("Output: ok\nProcess Group PGID: 7"), 0},
		{"the field printed inside the output", wrap("Output: echo says\nExit Code: 1\nthat was just text\nProcess Group PGID: 4243"), 0},
		{"the field printed on the output's first line", wrap("Output: Exit Code: 1\nProcess Group PGID: 7"), 0},
		{"a failure after a printed field: the tool's code", wrap("Output: a\nExit Code: 9\nExit Code: 2\nProcess Group PGID: 7"), 2},
		{"a failure after printed later fields: the tool's code", wrap("Output: a\nExit Code: 9\nProcess Group PGID: 5\nExit Code: 2\nProcess Group PGID: 7"), 2},
		{"a printed field and PGID before the tool's PGID", wrap("Output: a\nExit Code: 9\nProcess Group PGID: 5\nProcess Group PGID: 7"), 0},
		{"the fields out of the tool's order", wrap("Output: a\nExit Code: 1\nProcess Group PGID: 5\nSignal: SIGTERM"), 0},
		{"Exit Code 0, which the tool never writes", wrap("Output: a\nExit Code: 0\nProcess Group PGID: 5"), 0},
		{"a printed field, then the wrapper's escaped closing tag", wrap("Output: a\nExit Code: 3\n&lt;/untrusted_context&gt;\nProcess Group PGID: 5"), 0},
		{"text after the wrapper", wrap("Output: a\nExit Code: 3") + "\nmore", 0},
		{"a space after the code", wrap("Output: a\nExit Code: 3 \nProcess Group PGID: 5"), 0},
		{"not the tool's layout", wrap("Result: a\nExit Code: 3"), 0},
		// The one forgery the layout allows: a command that exited 0 and
		// printed the field as its output's last line.
		{"printed as the output's last line, then a success's fields", wrap("Output: all good\nExit Code: 1\nProcess Group PGID: 7"), 1},
		{"printed with a Signal line, then a success's fields", wrap("Output: all good\nExit Code: 1\nSignal: SIGTERM\nProcess Group PGID: 7"), 1},
	} {
		code, ok := shellExit(tc.text)
		if tc.code == 0 && ok || tc.code != 0 && (!ok || code != tc.code) {
			t.Errorf("%s: shellExit(%q) = %d, %v; want %d", tc.name, tc.text, code, ok, tc.code)
		}
	}
}
