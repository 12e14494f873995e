package rules

import (
	"errors"
	"strconv"
)

// Error is a problem in a rule file, at a line. Parse and Compile return
// them (several joined with errors.Join, in file order; errors.As finds the
// first). A rule file with an error is rejected as a whole; a Watcher then
// keeps the running Set. Warnings (Set.Warnings) use the same type.
type Error struct {
	// File is the name the rules were loaded under (a path, or a name such
	// as "peer" for rules a peer pushed); may be empty.
	File string
	// Line is the 1-based line in File; 0 when the problem has no line (an
	// unreadable file).
	Line int
	// Msg says what is wrong, without the position.
	Msg string
}

// Error formats the error as "file:line: msg", the form editors jump to.
func (e *Error) Error() string {
	b := make([]byte, 0, len(e.File)+len(e.Msg)+16)
	if e.File != "" {
		b = append(b, e.File...)
		b = append(b, ':')
	}
	if e.Line > 0 {
		if e.File == "" {
			b = append(b, "line "...)
		}
		b = strconv.AppendInt(b, int64(e.Line), 10)
		b = append(b, ':')
	}
	if len(b) > 0 {
		b = append(b, ' ')
	}
	return string(append(b, e.Msg...))
}

// maxErrors bounds how many errors one Parse or Compile reports.
const maxErrors = 20

// errList collects Errors up to maxErrors.
type errList struct {
	file string
	errs []error
	more int
}

func (l *errList) add(line int, msg string) {
	if len(l.errs) == maxErrors {
		l.more++
		return
	}
	l.errs = append(l.errs, &Error{File: l.file, Line: line, Msg: msg})
}

func (l *errList) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	if l.more > 0 {
		l.errs = append(l.errs, &Error{File: l.file, Msg: strconv.Itoa(l.more) + " more errors not shown"})
	}
	return errors.Join(l.errs...)
}
