package fleet

import "errors"

// Errors returned by [Speaker] methods. None is fatal to the speaker: it
// keeps running and keeps what it announced before the failed call.
var (
	// ErrNotStarted is returned by Announce, Withdraw and WithdrawAll before
	// Start and by Start after Stop.
	ErrNotStarted = errors.New("fleet: BGP speaker not running")
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("fleet: BGP speaker already started")
	// ErrPrefixOwned is returned (wrapped, naming the prefix and its owner)
	// by Announce when another edge already announces one of the prefixes.
	ErrPrefixOwned = errors.New("prefix announced by another edge")
	// ErrNoNextHop is returned (wrapped) by Announce for a prefix of an
	// address family that has no next hop in [Config].
	ErrNoNextHop = errors.New("no next hop configured for the prefix's address family")
)
