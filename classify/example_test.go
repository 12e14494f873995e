package classify_test

import (
	"encoding/hex"
	"fmt"
	"net/netip"

	"github.com/bondd/bondd/classify"
)

// An RTP H.264 packet (a STAP-A with SPS, PPS and an IDR slice) as a TUN
// device delivers it: IPv4, UDP 40000 → 5004, RTP PT 96.
var idrPacket, _ = hex.DecodeString("45b8004200000000401100000a0000010a000002" +
	"9c40138c002e0000" +
	"80600201000151800000abcd" +
	"780009" + "6742c01fda014016e8" + "0004" + "68ce3c80" + "0006" + "6588840033ff")

func ExampleClassifier_Parse() {
	c, err := classify.New(classify.Options{
		RTPPorts:     []classify.PortRange{{Lo: 5004, Hi: 5005}},
		PayloadTypes: map[uint8]classify.Codec{96: classify.CodecH264},
	})
	if err != nil {
		panic(err)
	}
	var md classify.Metadata // reused for every packet
	if r := c.Parse(idrPacket, &md); r != classify.ReasonNone {
		fmt.Println("drop:", r)
	}
	buf := make([]byte, 0, 64)
	for _, k := range []classify.Key{classify.KeyDSCP, classify.KeyCodec, classify.KeyFrameType, classify.KeyFrameID} {
		buf, _ = md.AppendValue(buf[:0], k)
		fmt.Printf("%s=%s\n", k, buf)
	}
	// Output:
	// dscp=46
	// codec=h264
	// frame_type=IDR
	// frame_id=0000abcd00015180
}

func ExampleNewClassSet() {
	set, err := classify.NewClassSet([]classify.Class{{
		Name: "video",
		Match: classify.ClassMatch{
			Protos: []uint8{17},
			Dst:    []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
			Ports:  []classify.PortRange{{Lo: 5004, Hi: 5010}},
		},
		Labels: []classify.Label{{Key: "tier", Value: "gold"}},
	}})
	if err != nil {
		panic(err)
	}
	c, _ := classify.New(classify.Options{Classes: set})
	var md classify.Metadata
	c.Parse(idrPacket, &md)
	tier, _ := set.KeyByName("tier")
	v, _ := md.AppendValue(nil, tier)
	fmt.Println(md.Class(), set.KeyName(tier)+"="+string(v))
	// Output: video tier=gold
}
