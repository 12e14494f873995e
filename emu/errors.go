package emu

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig is wrapped by every error that [NewLink], [NewRelay] and
// [Relay.SetConfig] return for a bad [LinkConfig] or [Options]. It is fatal
// for the call; nothing was started or changed.
var ErrInvalidConfig = errors.New("emu: invalid config")

// ParseError reports a problem in a trace file, with its position. The
// parsers ([ParseMahimahi], [ParseStarlinkCSV], [Parse5GophersCSV],
// [ParseRTTSamples]) return it, and it is fatal for that file.
type ParseError struct {
	File string // file name as given to the parser
	Line int    // 1-based line number; 0 when the problem concerns the whole file
	Err  error  // what is wrong
}

// Error formats the error as "file:line: message" (or "file: message").
func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.File, e.Err)
}

// Unwrap returns the underlying error.
func (e *ParseError) Unwrap() error { return e.Err }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}
