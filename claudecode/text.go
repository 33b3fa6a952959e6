package claudecode

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/strata-go/strata/internal/shell"
	"github.com/strata-go/strata/tier"
)

// clipText returns s cut to at most n bytes on a rune boundary, saying how
// many bytes are left out.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := tier.TruncateUTF8(s, n)
	return fmt.Sprintf("%s…(%d more bytes)", cut, len(s)-len(cut))
}

// oneLine quotes s if it holds a line break or a control character, so
// that it stays on its line.
func oneLine(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == 0x85 || r == 0x2028 || r == 0x2029 }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

func shellQuote(s string) string { return shell.Quote(s) }
