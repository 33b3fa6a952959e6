package tier_test

import (
	"reflect"
	"testing"

	"github.com/strata-go/strata/internal/mutate"
	"github.com/strata-go/strata/tier"
)

// TestClone_SharesNothing fills every exported field of each type the store
// hands out as a copy, by reflection, clones it, edits the original in
// place — every element of every list, every field of every element — and
// checks the copy is still what the original was: a field added to one of
// these types and left out of its Clone fails here.
func TestClone_SharesNothing(t *testing.T) {
	check := func(t *testing.T, orig any, clone func() any) {
		t.Helper()
		if n := mutate.Fill(orig); n < 10 {
			t.Fatalf("filled %d values", n)
		}
		want := reflect.ValueOf(orig).Elem().Interface()
		want = deepCopyForTest(want)
		got := clone()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("the clone differs from the original before any edit:\n got %+v\nwant %+v", got, want)
		}
		if n := mutate.Edit(orig); n < 10 {
			t.Fatalf("edited %d values", n)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("editing the original in place changed its clone:\n got %+v\nwant %+v", got, want)
		}
	}
	t.Run("Required", func(t *testing.T) {
		var r tier.Required
		check(t, &r, func() any { return r.Clone() })
	})
	t.Run("Claims", func(t *testing.T) {
		var c tier.Claims
		check(t, &c, func() any { return c.Clone() })
	})
	t.Run("Node", func(t *testing.T) {
		var n tier.Node
		check(t, &n, func() any { return n.Clone() })
	})
	t.Run("Nodes", func(t *testing.T) {
		var ns []tier.Node
		check(t, &ns, func() any { return tier.CloneNodes(ns) })
	})
	t.Run("Events", func(t *testing.T) {
		var es []tier.Event
		check(t, &es, func() any { return tier.CloneEvents(es) })
	})
}

// deepCopyForTest copies v through reflection, independently of the Clone
// methods under test: the value the original had before it was edited.
func deepCopyForTest(v any) any {
	return copyValue(reflect.ValueOf(v)).Interface()
}

func copyValue(v reflect.Value) reflect.Value {
	out := reflect.New(v.Type()).Elem()
	switch v.Kind() {
	case reflect.Slice:
		if v.IsNil() {
			return out
		}
		s := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := 0; i < v.Len(); i++ {
			s.Index(i).Set(copyValue(v.Index(i)))
		}
		out.Set(s)
	case reflect.Map:
		if v.IsNil() {
			return out
		}
		m := reflect.MakeMapWithSize(v.Type(), v.Len())
		it := v.MapRange()
		for it.Next() {
			m.SetMapIndex(copyValue(it.Key()), copyValue(it.Value()))
		}
		out.Set(m)
	case reflect.Pointer:
		if v.IsNil() {
			return out
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(copyValue(v.Elem()))
		out.Set(p)
	case reflect.Struct:
		out.Set(v)
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				out.Field(i).Set(copyValue(v.Field(i)))
			}
		}
	default:
		out.Set(v)
	}
	return out
}
