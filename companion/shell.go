package companion

import "strings"

// ShellWords splits a command line into words as sh does, for the forms a
// hook's command takes: words apart by blanks; '…' as it is; "…" with \
// before " \ $ and ` escaping it; \ outside quotes; $NAME and ${NAME}
// outside single quotes replaced by env(NAME), or kept as written when env
// is nil. ok is false for a line it does not read so: an unclosed quote,
// or any of | & ; < > ( ) ` outside quotes.
func ShellWords(s string, env func(string) string) (words []string, ok bool) {
	var w strings.Builder
	inWord := false
	expand := func(i int) int { // s[i] == '$': returns the index past the name
		j, name := i+1, ""
		if j < len(s) && s[j] == '{' {
			k := strings.IndexByte(s[j:], '}')
			if k < 0 {
				return -1
			}
			name, j = s[j+1:j+k], j+k+1
		} else {
			for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || j > i+1 && s[j] >= '0' && s[j] <= '9') {
				j++
			}
			name = s[i+1 : j]
		}
		switch {
		case name == "":
			w.WriteByte('$')
			return i + 1
		case env == nil:
			w.WriteString(s[i:j])
		default:
			w.WriteString(env(name))
		}
		return j
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
			i++
			continue
		case strings.IndexByte("|&;<>()`", c) >= 0:
			return nil, false
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 2
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				switch {
				case s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0:
					i++
					w.WriteByte(s[i])
				case s[i] == '$':
					if i = expand(i); i < 0 {
						return nil, false
					}
					i--
				default:
					w.WriteByte(s[i])
				}
			}
			if i >= len(s) {
				return nil, false
			}
			i++
		case c == '\\' && i+1 < len(s):
			w.WriteByte(s[i+1])
			i += 2
		case c == '$':
			if i = expand(i); i < 0 {
				return nil, false
			}
		default:
			w.WriteByte(c)
			i++
		}
		inWord = true
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, true
}
