package depsprobe

import (
	_ "github.com/gopacket/gopacket/pcapgo"
	_ "github.com/klauspost/reedsolomon"
	_ "github.com/quic-go/quic-go"
	_ "github.com/quic-go/quic-go/qlog"
	_ "github.com/spf13/cobra"
	_ "github.com/vishvananda/netlink"
	_ "github.com/vishvananda/netns"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/sys/unix"
	_ "golang.zx2c4.com/wireguard/tun"
)
