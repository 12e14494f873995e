package usage

import (
	"errors"
	"fmt"
)

// Causes of an OpenError: errors.Is(err, ErrX) tells them apart. Each is
// fatal to Open: the daemon refuses to start (see OpenError.Hint).
var (
	// ErrCorrupt: the file is not a readable bondd store (truncated, bad
	// checksum, not a bbolt file).
	ErrCorrupt = errors.New("the usage store is damaged")
	// ErrNewerVersion: the store was written by a newer bondd whose
	// format this one does not know.
	ErrNewerVersion = errors.New("the usage store was written by a newer bondd")
	// ErrInUse: another process (a running bondd) holds the store's lock.
	ErrInUse = errors.New("the usage store is in use by another process")
	// ErrReadOnly: the file or its file system cannot be written.
	ErrReadOnly = errors.New("the usage store cannot be written")
	// ErrNoSpace: the file system is full.
	ErrNoSpace = errors.New("no space left for the usage store")
)

// OpenError is the error of Open: the file, the cause (one of the Err
// sentinels above, or another error of the file system), and what the
// operator can do.
type OpenError struct {
	File  string // the store's path
	Cause error  // ErrCorrupt, ErrNewerVersion, ErrInUse, ErrReadOnly, ErrNoSpace or a file system error
	Err   error  // the underlying error, may be nil
	Hint  string // what to do
}

func (e *OpenError) Error() string {
	msg := fmt.Sprintf("usage store %s: %v", e.File, e.Cause)
	if e.Err != nil && e.Err != e.Cause {
		msg += " (" + e.Err.Error() + ")"
	}
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// Unwrap returns the cause and the underlying error.
func (e *OpenError) Unwrap() []error { return []error{e.Cause, e.Err} }

// hints says what to do for each cause.
var hints = map[error]string{
	ErrCorrupt:      "nothing was changed: keep the file for inspection and start with `bondd run --reset-state`, which moves it aside and starts an empty store",
	ErrNewerVersion: "nothing was changed: run the newer bondd again, or start with `bondd run --reset-state`, which moves the file aside",
	ErrInUse:        "is another bondd running with the same state_dir? Stop it, or give each daemon its own state_dir",
	ErrReadOnly:     "nothing was changed: make the state directory writable by the daemon (state_dir, default /var/lib/bondd)",
	ErrNoSpace:      "nothing was changed: free space on the file system of state_dir",
}
