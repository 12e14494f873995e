package tun

import (
	"errors"

	wgtun "golang.zx2c4.com/wireguard/tun"
)

var (
	// ErrTooManySegments is returned by a kernel [Device]'s Read when the
	// kernel handed over a GSO superpacket that splits into more packets than
	// len(bufs). The packets that fit were still returned (n is valid); the
	// error is not fatal and the caller keeps reading. Size bufs to
	// BatchSize() to avoid it. It is wireguard's sentinel, re-exported.
	ErrTooManySegments = wgtun.ErrTooManySegments

	// ErrInvalidConfig is wrapped by [Open] when the [Config] itself is
	// wrong (bad name, MTU out of range, invalid prefix); nothing was created.
	// It is fatal for that configuration.
	ErrInvalidConfig = errors.New("tun: invalid config")
)
