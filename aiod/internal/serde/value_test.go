package serde

import (
	"reflect"
	"testing"
)

func TestValueError(t *testing.T) {
	loc := make([]string, 1, 4)
	loc[0] = "body"
	e := ValueError("bad", append(loc, "x")...)
	_ = append(loc, "y") // the caller's array is reused; e keeps its own
	want := &Error{Location: []string{"body", "x"}, Message: "bad", Type: TypeValue}
	if !reflect.DeepEqual(e, want) {
		t.Fatalf("ValueError = %+v, want %+v", e, want)
	}
}
