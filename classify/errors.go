package classify

import "errors"

// ErrNoIntegerForm is wrapped by the error Key.ParseValue returns for keys
// whose values rules compare only as bytes (class, labels, IPv6 addresses).
// Not fatal: a rule compiler compares Metadata.AppendValue's output instead.
//
// Per-packet problems are never errors: Parse returns a Reason. Bad options
// and class definitions are reported by New and NewClassSet as errors that
// name the option or class at fault.
var ErrNoIntegerForm = errors.New("classify: key has no integer form")
