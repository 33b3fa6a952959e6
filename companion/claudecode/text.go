package claudecode

import (
	"strconv"
	"strings"
)

// oneLine quotes s if it holds a line break or a control character, so
// that it stays on its line.
func oneLine(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == 0x85 || r == 0x2028 || r == 0x2029 }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
