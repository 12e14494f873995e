package tunnel

import "github.com/bondd/bondd/tunnel/ctrlmsg"

// Limits other packages check against before they reach the tunnel (the
// config file, internal/config): the tunnel's own values, exported so that
// they are declared once.
const (
	// MaxPaths is the most paths (uplinks) one bond has; an edge with
	// more uplinks is refused (EdgeOptions.validate) and a concentrator
	// refuses a bond's further paths.
	MaxPaths = maxPaths
	// MaxNameBytes is the longest edge id and path (uplink) name, bytes.
	MaxNameBytes = maxNameLen
	// MaxLabelKeyBytes and MaxLabelValueBytes bound a path label's key and
	// value, bytes, as the control plane carries them.
	MaxLabelKeyBytes   = ctrlmsg.MaxLabelKey
	MaxLabelValueBytes = ctrlmsg.MaxLabelValue
)
