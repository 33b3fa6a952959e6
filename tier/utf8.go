package tier

import (
	"fmt"
	"reflect"
	"unicode/utf8"
)

// InvalidUTF8 returns where the first string reachable from v that is not
// valid UTF-8 is — a path of fields and indexes such as
// "Failures[2].Reason", with the byte offset of its first invalid byte —
// or "" when every string is valid. It reads every exported field of every
// element of every list, so a field added to v's type is read too: the
// store checks a summary's claims with it.
func InvalidUTF8(v any) string {
	return invalidUTF8(reflect.ValueOf(v), "")
}

func invalidUTF8(v reflect.Value, path string) string {
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		if utf8.ValidString(s) {
			return ""
		}
		i := 0
		for i < len(s) {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			i += n
		}
		if path == "" {
			return fmt.Sprintf("byte %d", i)
		}
		return fmt.Sprintf("%s, byte %d", path, i)
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return ""
		}
		return invalidUTF8(v.Elem(), path)
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return "" // bytes, not text
		}
		for i := 0; i < v.Len(); i++ {
			if w := invalidUTF8(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); w != "" {
				return w
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			p := path + "[…]" // a key is not echoed: it may be the invalid text
			if w := invalidUTF8(it.Key(), p+" key"); w != "" {
				return w
			}
			if w := invalidUTF8(it.Value(), p); w != "" {
				return w
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < v.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			p := f.Name
			if path != "" {
				p = path + "." + f.Name
			}
			if w := invalidUTF8(v.Field(i), p); w != "" {
				return w
			}
		}
	}
	return ""
}
