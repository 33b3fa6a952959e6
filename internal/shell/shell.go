// Package shell quotes words for the command lines strata prints: in
// hints, in the context a Claude Code hook injects.
package shell

import "strings"

// Quote returns s as one POSIX shell word: as it is when it holds only
// characters no shell treats specially, else in single quotes.
func Quote(s string) string {
	safe := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:=@%,", r))
	}) < 0
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
