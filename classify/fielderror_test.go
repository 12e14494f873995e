package classify

import (
	"errors"
	"testing"
)

// TestNewClassSetFieldError checks that an error about one class is a
// *FieldError naming that class, with the message unchanged.
func TestNewClassSetFieldError(t *testing.T) {
	_, err := NewClassSet([]Class{{Name: "a"}, {Name: "video"}, {Name: "video"}})
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "classes[2]" || fe.Err.Error() != "duplicate name" {
		t.Fatalf("err = %#v, want a *FieldError on classes[2]", err)
	}
	if got, want := err.Error(), `classify: class 3 ("video"): duplicate name`; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	_, err = NewClassSet(make([]Class, MaxClasses+1))
	if errors.As(err, &fe) {
		t.Errorf("too many classes: %v is a *FieldError; want an error about the list", err)
	}
}
