// Package mutate edits values in place by reflection, for the tests that
// check that what strata hands a summarizer or a caller is a copy: Edit
// changes every exported value reachable from a pointer — every element of
// every list, every field of every element, every map value — so that a
// field added to a handed-over type is edited too, with no test to update;
// Fill gives every such value a non-zero one first, so that there is
// something to edit.
package mutate

import (
	"fmt"
	"reflect"
)

// Edit changes, in place, every exported value reachable from ptr (a
// non-nil pointer): strings get a suffix, numbers are incremented,
// booleans flipped, and slices, arrays, maps, pointers and structs are
// walked into — a slice's elements in the backing array it shares with
// whoever else holds it. It returns the number of values it changed.
func Edit(ptr any) int {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		panic(fmt.Sprintf("mutate: Edit of %T, not a non-nil pointer", ptr))
	}
	return edit(v.Elem())
}

func edit(v reflect.Value) int {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + " [edited]")
		return 1
	case reflect.Bool:
		v.SetBool(!v.Bool())
		return 1
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
		return 1
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(v.Uint() + 1)
		return 1
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1)
		return 1
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return 0
		}
		if v.Kind() == reflect.Interface {
			// An interface's dynamic value is not addressable: edit a copy
			// and put it back.
			c := reflect.New(v.Elem().Type()).Elem()
			c.Set(v.Elem())
			n := edit(c)
			v.Set(c)
			return n
		}
		return edit(v.Elem())
	case reflect.Slice, reflect.Array:
		n := 0
		for i := 0; i < v.Len(); i++ {
			n += edit(v.Index(i))
		}
		return n
	case reflect.Map:
		n := 0
		it := v.MapRange()
		for it.Next() {
			c := reflect.New(it.Value().Type()).Elem()
			c.Set(it.Value())
			n += edit(c)
			v.SetMapIndex(it.Key(), c)
		}
		return n
	case reflect.Struct:
		n := 0
		t := v.Type()
		for i := 0; i < v.NumField(); i++ {
			if t.Field(i).IsExported() {
				n += edit(v.Field(i))
			}
		}
		return n
	}
	return 0
}

// Fill sets every exported value reachable from ptr (a non-nil pointer) to
// a non-zero one: strings and numbers distinct by their place, slices and
// maps of two elements, pointers to a filled value. It returns the number
// of values it set.
func Fill(ptr any) int {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		panic(fmt.Sprintf("mutate: Fill of %T, not a non-nil pointer", ptr))
	}
	n := 0
	fill(v.Elem(), &n, 0)
	return n
}

// maxDepth bounds Fill on recursive types.
const maxDepth = 8

func fill(v reflect.Value, n *int, depth int) {
	if depth > maxDepth {
		return
	}
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("v%d", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(1 + *n%100))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(uint64(1 + *n%100))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n))
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), n, depth+1)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := 0; i < 2; i++ {
			fill(s.Index(i), n, depth+1)
		}
		v.Set(s)
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			fill(v.Index(i), n, depth+1)
		}
	case reflect.Map:
		m := reflect.MakeMapWithSize(v.Type(), 2)
		for i := 0; i < 2; i++ {
			k := reflect.New(v.Type().Key()).Elem()
			fill(k, n, depth+1)
			e := reflect.New(v.Type().Elem()).Elem()
			fill(e, n, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < v.NumField(); i++ {
			if t.Field(i).IsExported() {
				fill(v.Field(i), n, depth+1)
			}
		}
	default:
		*n--
	}
}
