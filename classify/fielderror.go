package classify

// FieldError is an error of NewClassSet about one field of its input, so
// that a caller can point at the field without parsing the message: the
// daemon's config turns Field into "classify.classes[2]" with the file and
// line of that class.
type FieldError struct {
	// Field is the field at fault as a path from the classify section of a
	// config file, list indexes 0-based: "classes[2]" is the third class.
	Field string
	// What names the field for a reader: `class 3 ("video")`.
	What string
	// Err is the problem, without the field.
	Err error
}

// Error returns "classify: WHAT: PROBLEM".
func (e *FieldError) Error() string { return "classify: " + e.What + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *FieldError) Unwrap() error { return e.Err }
