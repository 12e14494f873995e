package usage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// FileName is the store's file name in the state directory.
const FileName = "usage.db"

// SchemaVersion is the store format this bondd writes. A store of a higher
// version is refused (ErrNewerVersion).
const SchemaVersion = 1

// Bucket names.
var (
	bucketMeta   = []byte("meta")
	bucketPeriod = []byte("period") // appendKey → periodRecord
	bucketHours  = []byte("hours")  // hourKey → Counts
	keySchema    = []byte("schema")
	keyCreated   = []byte("created")
)

// lockWait is how long Open waits for another process's lock.
const lockWait = 200 * time.Millisecond

// Store is the usage database of one daemon. Its methods are safe for
// concurrent use (bbolt serialises writers).
type Store struct {
	db      *bolt.DB
	file    string
	created time.Time
}

// StoreOptions tune Open.
type StoreOptions struct {
	// ReadOnly opens an existing store without writing it (bondd usage):
	// it neither creates the file nor takes the writer's lock, so it
	// fails with ErrInUse while a daemon holds the store.
	ReadOnly bool
}

// Open opens (or, unless read-only, creates) dir/usage.db. It returns an
// *OpenError naming the file, the cause and what to do when the store is
// damaged or truncated (ErrCorrupt), of a newer version
// (ErrNewerVersion), locked by another process (ErrInUse), on a read-only
// file or file system (ErrReadOnly) or a full one (ErrNoSpace). It never
// replaces or modifies a store it refuses; see MoveAside for that.
func Open(dir string, o StoreOptions) (s *Store, err error) {
	file := filepath.Join(dir, FileName)
	fail := func(cause, under error) (*Store, error) {
		return nil, &OpenError{File: file, Cause: cause, Err: under, Hint: hints[cause]}
	}
	fi, statErr := os.Stat(file)
	switch {
	case statErr == nil && !fi.Mode().IsRegular():
		return fail(ErrCorrupt, errors.New("not a regular file"))
	case statErr == nil && fi.Size() == 0:
		return fail(ErrCorrupt, errors.New("the file is empty"))
	case errors.Is(statErr, os.ErrNotExist) && o.ReadOnly:
		return nil, &OpenError{File: file, Cause: os.ErrNotExist, Hint: "no usage recorded yet in this state directory (see --state-dir and the config's state_dir)"}
	case errors.Is(statErr, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fail(classify(err), err)
		}
	case statErr != nil:
		return fail(classify(statErr), statErr)
	}
	// A truncated or damaged file can make bbolt read past the end of its
	// memory map: a fault, turned into a panic here and then an error.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			s, err = fail(ErrCorrupt, fmt.Errorf("%v", r))
		}
	}()
	db, err := bolt.Open(file, 0o640, &bolt.Options{Timeout: lockWait, ReadOnly: o.ReadOnly})
	if err != nil {
		if statErr != nil { // a new file: remove what the failed create left
			os.Remove(file)
		}
		return fail(classify(err), err)
	}
	s = &Store{db: db, file: file}
	if err := s.check(fi, o.ReadOnly); err != nil {
		db.Close()
		if statErr != nil {
			os.Remove(file)
		}
		var oe *OpenError
		if errors.As(err, &oe) {
			return nil, err
		}
		return fail(classify(err), err)
	}
	return s, nil
}

// checkMaxBytes is the largest store whose every record Open reads; a
// larger one only gets the size check.
const checkMaxBytes = 256 << 20

// check validates an opened store (its size against what its meta page
// says, its schema version and, up to checkMaxBytes, every record: a
// damaged page faults or makes bbolt panic here, in Open's goroutine,
// where both become ErrCorrupt) and, for a new file (fi nil), creates the
// buckets. bbolt's own Tx.Check is not used: it reads the pages on a
// goroutine of its own, where a fault would end the process.
func (s *Store) check(fi os.FileInfo, readOnly bool) error {
	cerr := func(err error) error {
		return &OpenError{File: s.file, Cause: ErrCorrupt, Err: err, Hint: hints[ErrCorrupt]}
	}
	if fi != nil {
		if err := s.db.View(func(tx *bolt.Tx) error {
			if tx.Size() > fi.Size() {
				return cerr(fmt.Errorf("truncated: %d bytes, its pages need %d", fi.Size(), tx.Size()))
			}
			if fi.Size() > checkMaxBytes {
				return nil
			}
			return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
				return b.ForEach(func(k, v []byte) error { // every record decodes, its CRC-32 matches
					var err error
					switch string(name) {
					case string(bucketPeriod):
						var r periodRecord
						if _, err = parseKey(k); err == nil {
							err = decodePeriod(v, &r)
						}
					case string(bucketHours):
						var c Counts
						if _, _, err = parseHourKey(k); err == nil {
							err = decodeHour(v, &c)
						}
					}
					if err != nil {
						return cerr(fmt.Errorf("bucket %s, key %x: %w", name, k, err))
					}
					return nil
				})
			})
		}); err != nil {
			return err
		}
	}
	return s.readMeta(fi == nil && !readOnly)
}

// readMeta reads (or, for a new store, writes) the schema version and the
// creation time.
func (s *Store) readMeta(create bool) error {
	if create {
		if err := s.db.Update(func(tx *bolt.Tx) error {
			meta, err := tx.CreateBucketIfNotExists(bucketMeta)
			if err != nil {
				return err
			}
			for _, b := range [][]byte{bucketPeriod, bucketHours} {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			meta.Put(keySchema, fmt.Appendf(nil, "%d", SchemaVersion))
			return meta.Put(keyCreated, []byte(time.Now().UTC().Format(time.RFC3339)))
		}); err != nil {
			return err
		}
	}
	return s.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil || tx.Bucket(bucketPeriod) == nil || tx.Bucket(bucketHours) == nil {
			return &OpenError{File: s.file, Cause: ErrCorrupt, Err: errors.New("buckets missing: not a bondd usage store"), Hint: hints[ErrCorrupt]}
		}
		var v int
		if _, err := fmt.Sscanf(string(meta.Get(keySchema)), "%d", &v); err != nil {
			return &OpenError{File: s.file, Cause: ErrCorrupt, Err: errors.New("no schema version"), Hint: hints[ErrCorrupt]}
		}
		if v > SchemaVersion {
			return &OpenError{File: s.file, Cause: ErrNewerVersion, Err: fmt.Errorf("schema %d, this bondd knows %d", v, SchemaVersion), Hint: hints[ErrNewerVersion]}
		}
		s.created, _ = time.Parse(time.RFC3339, string(meta.Get(keyCreated)))
		return nil
	})
}

// classify maps a file system or bbolt error to an Open cause.
func classify(err error) error {
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return ErrInUse
	case errors.Is(err, bolterrors.ErrVersionMismatch), errors.Is(err, bolterrors.ErrInvalid),
		errors.Is(err, bolterrors.ErrChecksum), errors.Is(err, bolterrors.ErrInvalidMapping):
		return ErrCorrupt
	case errors.Is(err, syscall.EROFS), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, bolterrors.ErrDatabaseReadOnly):
		return ErrReadOnly
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return ErrNoSpace
	}
	return ErrCorrupt
}

// File returns the store's path.
func (s *Store) File() string { return s.file }

// Created returns when the store was created (UTC), the start of its
// lifetime totals; zero if unknown.
func (s *Store) Created() time.Time { return s.created }

// Close closes the store; it does not write.
func (s *Store) Close() error { return s.db.Close() }

// MoveAside renames dir/usage.db to dir/usage.db.<UTC time>.bak (bondd run
// --reset-state) and returns the new name; "" when there was no file.
// It never deletes anything.
func MoveAside(dir string, now time.Time) (string, error) {
	file := filepath.Join(dir, FileName)
	if _, err := os.Lstat(file); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	to := file + "." + now.UTC().Format("20060102T150405Z") + ".bak"
	if err := os.Rename(file, to); err != nil {
		return "", fmt.Errorf("moving the usage store aside: %w", err)
	}
	return to, nil
}

// guard turns a panic of bbolt on a page it finds inconsistent (or a
// memory fault on a damaged file) into an ErrCorrupt error in *err, so a
// store damaged after Open fails a flush or a query instead of the daemon.
func (s *Store) guard(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: %s: %v", ErrCorrupt, s.file, r)
	}
}

// loadPeriods returns every path's period record.
func (s *Store) loadPeriods() (_ map[Key]periodRecord, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.guard(&err)
	out := make(map[Key]periodRecord)
	err = s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPeriod).ForEach(func(k, v []byte) error {
			key, err := parseKey(k)
			var r periodRecord
			if err == nil {
				err = decodePeriod(v, &r)
			}
			if err != nil { // never a silent restart of the path's count
				return fmt.Errorf("%w: period record %x: %v", ErrCorrupt, k, err)
			}
			out[key] = r
			return nil
		})
	})
	return out, err
}

// hourRow is one hour of one path's history.
type hourRow struct {
	Hour time.Time
	Key  Key
	C    Counts
}

// hours calls fn for every stored hour in [since, until), in time order.
func (s *Store) hours(since, until time.Time, fn func(hourRow)) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.guard(&err)
	return s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketHours).Cursor()
		from := hourKey(nil, since.Truncate(time.Hour), Key{})[:8]
		for k, v := c.Seek(from); k != nil; k, v = c.Next() {
			h, key, err := parseHourKey(k)
			if err != nil {
				continue
			}
			if !h.Before(until) {
				break
			}
			var r hourRow
			if decodeHour(v, &r.C) == nil {
				r.Hour, r.Key = h, key
				fn(r)
			}
		}
		return nil
	})
}

// openHours calls fn for the open hour, and the closed hour not yet in
// the history, of every stored path record in [since, until).
func (s *Store) openHours(since, until time.Time, fn func(hourRow)) error {
	recs, err := s.loadPeriods()
	for k, r := range recs {
		r.recordHours(k, since, until, fn)
	}
	return err
}

// recordHours calls fn for r's open and closed hours in [since, until).
func (r *periodRecord) recordHours(k Key, since, until time.Time, fn func(hourRow)) {
	for _, h := range [2]hourRow{{r.HourStart, k, r.Hour}, {r.PrevStart, k, r.Prev}} {
		if !h.C.IsZero() && !h.Hour.Before(since.Truncate(time.Hour)) && h.Hour.Before(until) {
			fn(h)
		}
	}
}

// sumHours returns k's history summed over [since, until), open hours
// aside.
func (s *Store) sumHours(k Key, since, until time.Time) (Counts, error) {
	var sum Counts
	err := s.hours(since, until, func(r hourRow) {
		if r.Key == k {
			sum.Add(r.C)
		}
	})
	return sum, err
}

// write is one flush: closed hours to add to the history and path
// records to store (keyed by appendKey's bytes, in key order), in one
// transaction; hours before prune are deleted when prune is not zero.
type write struct {
	hours   []hourRow
	periods []keyedRecord
	prune   time.Time
}

// keyedRecord is a period record with its encoded key.
type keyedRecord struct {
	key []byte
	rec *periodRecord // read during apply only
}

// apply writes w in one transaction: all or nothing.
func (s *Store) apply(w *write) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.guard(&err)
	return s.db.Update(func(tx *bolt.Tx) error {
		hb, pb := tx.Bucket(bucketHours), tx.Bucket(bucketPeriod)
		// Hours are keyed by time: they arrive in key order, so full
		// pages (bbolt's default leaves appended pages half empty).
		hb.FillPercent = 0.95
		// bbolt keeps keys and values until the commit: each gets its own
		// bytes in arena (appends never move what was sliced before).
		arena := make([]byte, 0, 96*len(w.hours)+192*len(w.periods))
		var kbuf, vbuf []byte
		for _, r := range w.hours {
			n := len(arena)
			arena = hourKey(arena, r.Hour, r.Key)
			kbuf = arena[n:len(arena):len(arena)]
			c := r.C
			if old := hb.Get(kbuf); old != nil {
				var prev Counts
				if decodeHour(old, &prev) == nil {
					c.Add(prev)
				}
			}
			n = len(arena)
			arena = encodeHour(arena, &c)
			vbuf = arena[n:len(arena):len(arena)]
			if err := hb.Put(kbuf, vbuf); err != nil {
				return err
			}
		}
		for i := range w.periods {
			n := len(arena)
			arena = encodePeriod(arena, w.periods[i].rec)
			vbuf = arena[n:len(arena):len(arena)]
			if err := pb.Put(w.periods[i].key, vbuf); err != nil {
				return err
			}
		}
		if !w.prune.IsZero() {
			end := hourKey(nil, w.prune, Key{})[:8]
			c := hb.Cursor()
			for k, _ := c.First(); k != nil && bytes.Compare(k[:min(8, len(k))], end) < 0; k, _ = c.First() {
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
		return nil
	})
}
