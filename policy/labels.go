package policy

// Labels that change at run time, and the peer's view of a path's status.
// bondd's control plane (MoMQ appendix A.2: PATH_LABEL_UPDATE and
// PATH_STATE_REPORT) changes both while packets are being scheduled, so
// both are published atomically and read lock-free.

// Label returns the value of the path's label key and whether the path has
// it, from the map last published by SetLabels, else from Labels.
// Lock-free; does not allocate.
func (p *Path) Label(key string) (string, bool) {
	v, ok := p.CurrentLabels()[key]
	return v, ok
}

// CurrentLabels returns the label map in force: the one last published by
// SetLabels, or Labels. The map is shared: callers must not modify it.
func (p *Path) CurrentLabels() map[string]string {
	if m := p.labels.Load(); m != nil {
		return *m
	}
	return p.Labels
}

// SetLabels publishes m as the path's labels, replacing what Labels or an
// earlier SetLabels said (copy-on-write: m is retained and must not be
// modified afterwards). A nil m goes back to Labels. Safe for concurrent
// use with every reader.
func (p *Path) SetLabels(m map[string]string) {
	if m == nil {
		p.labels.Store(nil)
		return
	}
	p.labels.Store(&m)
}

// SetPeerUnavailable records whether the peer reports the path UNAVAILABLE
// (a PATH_STATE_REPORT from the edge, which may see an uplink fail before
// this end's idle timeout does). While set, Status and LinkStatus say
// UNAVAILABLE and no picker chooses the path. The tunnel clears it when
// the peer reports the path otherwise, when a new connection of the path
// arrives, and when the peer's session ends.
func (p *Path) SetPeerUnavailable(down bool) { p.peerDown.Store(down) }

// PeerUnavailable reports whether the peer reports the path UNAVAILABLE.
func (p *Path) PeerUnavailable() bool { return p.peerDown.Load() }
