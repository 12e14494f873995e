package tunnel

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/bondd/bondd/fec"
	"github.com/bondd/bondd/internal/monoclock"
	"github.com/bondd/bondd/internal/timerheap"
	"github.com/bondd/bondd/policy"
)

// Forward error correction in the bond (paper 1, scheduler-agnostic adaptive
// FEC, applied to IP packets). Until per-class rules exist every data packet
// a bond sends belongs to FEC class 0.
//
// Send side: the TUN reader adds each data packet to the open block
// (fec.Encoder.Add) and sends it at once with the block fields in its
// header. When the block holds k packets the TUN reader seals it; when its
// time budget runs out first, the bond's flush timer does (fecFlushTick,
// on the node's timer heap, idle.go). Sealing sizes r from the
// loss-interval estimate of each path the block's packets went out on and
// hands the r parity shards to the same picker as data.
//
// Receive side: every path's receive routine hands FEC packets to the
// bond's fec.Decoder, which delivers data at once and reconstructs missing
// data once any k of a block's k + r packets are in; fecExpireTick times
// out blocks and follows the paths' RTT spread.

// FEC modes.
const (
	FECAdaptive = "adaptive" // r = min(k, ⌈α·Σ k_i·p_i⌉) per block (the default)
	FECFixed    = "fixed"    // r = ⌈Ratio·k⌉ per block
	FECOff      = "off"      // no FEC fields, no parity
)

// FECOptions configures the FEC of what a bond sends. The zero value is
// adaptive FEC with the paper's k = 20 and α = 2 and a 30 ms block budget.
type FECOptions struct {
	Mode   string        // FECAdaptive (""), FECFixed or FECOff
	K      int           // data packets per block; default 20
	Alpha  float64       // adaptive: safety factor α; default 2
	Ratio  float64       // fixed: parity packets per data packet, (0, 1]
	Budget time.Duration // longest a block stays open; default 30 ms (fec.DefaultBudget)
	// VideoResidual, adaptive: the highest probability with which a
	// block holding a video packet may fail to rebuild its data, for the
	// parity count of fec.AssuredParity; default DefaultVideoResidual,
	// < 0 for α's parity alone.
	VideoResidual float64
	// Placement is where a block's packets go (policy/placement.go):
	// policy.PlacementDefault ("": data and parity through the bond's
	// picker), PlacementRate (the bond's picker becomes a
	// policy.RateSpread: data and parity spread in proportion to path
	// rate), PlacementEarliest (parity on the path carrying the fewest of
	// the block's data packets with the earliest expected delivery,
	// policy.ParityPath) or PlacementRateEarliest (both).
	Placement string
}

// DefaultVideoResidual bounds the probability that an FEC block holding a
// video packet (RTP video or MPEG-TS, classify.Codec.IsVideo) cannot be
// rebuilt. A video packet lost for good breaks every frame after it until
// the next keyframe (a GOP of 2 s is 50 frames), so α's parity, sized to
// the expected loss, is too little for it: with 1.5 % loss and the 6 to 12
// packets a 30-ms block of a 2 to 4 Mbit/s stream holds, one parity packet
// leaves 2·10⁻³ to 10⁻² of the blocks unrebuilt, one every few seconds.
// 10⁻⁴ is one block in 10⁴: at 25 blocks a second, at most one datagram
// lost for good in about 7 minutes, which costs at most a GOP, so ≥ 99.5 %
// of the frames arrive intact. It costs a second parity packet per small
// block (three for k = 5 to 9, four for k = 20, at 1.5 % loss).
const DefaultVideoResidual = 1e-4

func (o FECOptions) withDefaults() FECOptions {
	if o.Mode == "" {
		o.Mode = FECAdaptive
	}
	if o.K == 0 {
		o.K = fec.DefaultK
	}
	if o.Alpha == 0 {
		o.Alpha = fec.DefaultAlpha
	}
	if o.Budget == 0 {
		o.Budget = fec.DefaultBudget
	}
	if o.VideoResidual == 0 {
		o.VideoResidual = DefaultVideoResidual
	}
	return o
}

func (o FECOptions) validate() error {
	switch o.Mode {
	case FECAdaptive, FECOff:
	case FECFixed:
		if o.Ratio <= 0 || o.Ratio > 1 {
			return fmt.Errorf("fixed FEC needs a ratio in (0, 1], got %v", o.Ratio)
		}
	default:
		return fmt.Errorf("FEC mode %q is not adaptive, fixed or off", o.Mode)
	}
	if o.K < 1 || o.K > fec.DefaultMaxK {
		return fmt.Errorf("FEC k %d is outside 1..%d", o.K, fec.DefaultMaxK)
	}
	if o.Alpha < 0 || o.Budget < 0 {
		return errors.New("FEC alpha and budget must not be negative")
	}
	if o.VideoResidual >= 1 {
		return fmt.Errorf("FEC video residual %v is not below 1", o.VideoResidual)
	}
	return policy.ValidatePlacement(o.Placement)
}

// fecSender is the send side of one bond's FEC.
type fecSender struct {
	enc          *fec.Encoder
	opts         FECOptions
	parityPlaced bool                            // opts.Placement places parity (policy.ParityPath)
	mtu          int                             // bytes: the longest packet protected
	flush        atomic.Pointer[timerheap.Timer] // the bond's flush timer, armed when a block opens (nil before the bond starts)

	// Owned by the TUN reader goroutine.
	rd  fec.Redundancy
	par fec.Parity

	// Owned by fecFlushTick.
	rdT   fec.Redundancy
	parT  fec.Parity
	picks []int
	fitT  fitScratch
}

func newFECSender(o FECOptions, mtu int) (*fecSender, error) {
	mtu += MaxFlowTagLen // a protected payload may start with a flow tag
	enc, err := fec.NewEncoder(fec.EncoderOptions{K: o.K, Budget: o.Budget, MaxPacketLen: mtu})
	if err != nil {
		return nil, err
	}
	return &fecSender{enc: enc, opts: o, parityPlaced: policy.PlacementPlacesParity(o.Placement), mtu: mtu, fitT: newFitScratch()}, nil
}

// parityBufs gives p its K parity buffers the first time a block is
// sealed into it: a bond that sends nothing (an idle bond on the
// concentrator) holds none.
func (s *fecSender) parityBufs(p *fec.Parity) *fec.Parity {
	if p.Bufs == nil { // once per Parity
		for range s.opts.K {
			p.Bufs = append(p.Bufs, make([]byte, s.mtu+fec.ShardOverhead))
		}
	}
	return p
}

// redundancy fills rd for the bond's current paths.
func (s *fecSender) redundancy(rd *fec.Redundancy, set *pathSet) *fec.Redundancy {
	switch s.opts.Mode {
	case FECFixed:
		rd.Ratio = s.opts.Ratio
		return rd
	}
	rd.Alpha = s.opts.Alpha
	rd.Residual = max(s.opts.VideoResidual, 0)
	rd.Loss, rd.AssuredLoss = rd.Loss[:0], rd.AssuredLoss[:0]
	for _, p := range set.paths {
		rd.Loss = append(rd.Loss, p.loss.Rate())
		rd.AssuredLoss = append(rd.AssuredLoss, p.loss.UpperRate())
	}
	return rd
}

// protect adds the data packet pkt, going out on path index pi, to the open
// block and fills h's FEC fields; video marks a packet of a video stream,
// whose block gets the parity of FECOptions.VideoResidual. When the block
// is now full it seals it and reports true: the caller sends s.par with
// sendParity after the data packet.
func (b *Bond) protect(pkt []byte, pi int, video bool, h *Header, now time.Time) (sealed bool) {
	s := b.fecTx
	add := s.enc.Add
	if video {
		add = s.enc.AddAssured
	}
	ref, full, ok := add(now, pkt, pi)
	if !ok {
		return false // too long to protect: goes out without FEC fields
	}
	h.Flags |= FlagFEC
	h.Class, h.Block, h.Index, h.K = ref.Class, ref.Block, uint16(ref.Index), uint16(ref.K)
	if t := s.flush.Load(); ref.Index == 0 && t != nil {
		t.ResetEarlier(now.Add(s.opts.Budget)) // the block's deadline (fec.Encoder.Deadline)
	}
	return full && s.enc.Seal(ref.Block, s.redundancy(&s.rd, b.paths.Load()), s.parityBufs(&s.par))
}

// sendParity frames the parity shards in p and queues each on a path the
// picker chooses, as for data. Parity never queues behind a full congestion
// window: when the chosen path could not send it at once it is skipped and
// counted, because parity that waits makes the data it protects wait too
// and comes too late to repair anything. picks and fs are the caller's
// scratch.
func (b *Bond) sendParity(p *fec.Parity, picks []int, fs *fitScratch, now time.Time) {
	set := b.paths.Load()
	var counts [fec.MaxPaths]int // placement earliest: the block's packets per path so far
	copy(counts[:], p.KPerPath)
	for j, shard := range p.Shards {
		ref := p.ShardRef(j)
		states, idx := b.fitStates(set, len(shard)+HeaderBudget, fs) // paths whose budget carries it (pmtu.go)
		if b.fecTx.parityPlaced {
			var sub [fec.MaxPaths]int // counts of the paths in states
			n := min(len(states), len(sub))
			for i := range n {
				if idx == nil {
					sub[i] = counts[i]
				} else {
					sub[i] = counts[idx[i]]
				}
			}
			i := policy.ParityPath(states, sub[:n], now)
			if i < 0 || len(picks) == 0 {
				b.drops.add(DropParitySkipped)
				continue
			}
			picks[0] = i
		} else if len(picks) < len(set.paths) || len(states) == 0 || b.picker.Pick(states, now, picks) == 0 {
			b.drops.add(DropParitySkipped) // not data: no_path counts data alone
			continue
		}
		remap(picks, 1, idx)
		if picks[0] < len(counts) {
			counts[picks[0]]++
		}
		if !set.states[picks[0]].HasWindow() {
			b.drops.add(DropParitySkipped)
			continue
		}
		h := Header{Type: TypeParity, Flags: FlagFEC, Seq: b.seq.Add(1) - 1, Timestamp: uint64(monoclock.Micros(now)),
			Class: ref.Class, Block: ref.Block, Index: uint16(ref.Index), K: uint16(ref.K), R: uint16(ref.R), MaxLen: uint16(ref.MaxLen)}
		b.flagPathSeq(&h, 0, len(shard))
		buf := getBuf()
		off := Headroom - HeaderLen(&h)
		AppendHeader(buf[off:off], &h)
		end := Headroom + copy(buf[Headroom:], shard)
		set.paths[picks[0]].queue.push(frame{buf: buf, off: off, end: end, enqueued: monoclock.Nanos(now)})
	}
}

// fecFlushTick closes a block whose time budget ran out before it
// filled, so parity is never later than the budget at low packet rates,
// and re-arms the flush timer for the next open block. Runs on the node's
// timer heap (idle.go).
func (b *Bond) fecFlushTick(now, _ time.Time) {
	s := b.fecTx
	t := b.idle.fecFlush
	deadline, open := s.enc.Deadline()
	if !open {
		return
	}
	if now.Before(deadline) {
		t.ResetEarlier(deadline)
		return
	}
	if s.enc.Flush(now, s.redundancy(&s.rdT, b.paths.Load()), s.parityBufs(&s.parT)) {
		if n := len(b.paths.Load().paths); len(s.picks) < n {
			s.picks = make([]int, n)
		}
		b.sendParity(&s.parT, s.picks, &s.fitT, now)
	}
	if deadline, open := s.enc.Deadline(); open {
		t.ResetEarlier(deadline)
	}
}

// newRecovered returns a path receive routine's buffers for reconstructed
// packets (inner packet and flow tag), with 16 ≥ tun.MinWriteOffset bytes
// of headroom each. The decoder allocates them as reconstructions first
// need them (fec.Recovered.BufLen): a connection that never recovers a
// packet holds none.
func newRecovered(mtu int) *fec.Recovered {
	return &fec.Recovered{Offset: 16, BufLen: max(mtu+MaxFlowTagLen, 1500)}
}

// fecExpireTick times out blocks whose packets stopped coming, and sets
// the decoder's timeout from the spread of the paths' RTTs: a block waits
// for its slowest path's packets, no longer. Runs on the node's timer heap
// (idle.go) every fecExpireInterval while blocks are pending or packets
// arrive, every fecIdleExpireInterval while the bond is awake but quiet,
// and not at all while it sleeps (no block can be pending then: the
// longest timeout, fecMaxTimeout, is shorter than IdleAfter); waking
// re-arms it.
func (b *Bond) fecExpireTick(now, _ time.Time) {
	b.dec.SetTimeout(fecTimeout(b.paths.Load(), b.dec.ParityLag()))
	b.dec.Expire(now)
	rx := b.ctr.rxPackets.Load()
	interval := fecIdleExpireInterval
	pending := b.dec.Pending()
	if rx != b.fecLastRx || pending {
		interval = fecExpireInterval
	}
	b.fecLastRx = rx
	if b.asleep() && !pending {
		return
	}
	b.idle.fecExpire.Reset(now.Add(interval))
}

const (
	fecExpireInterval     = 50 * time.Millisecond
	fecIdleExpireInterval = 500 * time.Millisecond
	fecMinTimeout         = 50 * time.Millisecond
	fecMaxTimeout         = time.Second
)

// fecTimeout is twice the spread of the connected paths' smoothed RTTs plus
// the block's time to its parity and a margin, within [fecMinTimeout,
// fecMaxTimeout]. The time to parity is the default block budget, or the
// parity lag the decoder measured when longer (a peer with a longer
// fec.budget: without it such blocks would expire before their parity).
func fecTimeout(set *pathSet, parityLag time.Duration) time.Duration {
	var lo, hi time.Duration
	for i, p := range set.states {
		r := p.SmoothedRTT()
		if i == 0 || r < lo {
			lo = r
		}
		hi = max(hi, r)
	}
	return min(max(2*(hi-lo)+max(fec.DefaultBudget, parityLag)+20*time.Millisecond, fecMinTimeout), fecMaxTimeout)
}

// fecRef converts a header's FEC fields.
func fecRef(h *Header) fec.Ref {
	return fec.Ref{Class: h.Class, Block: h.Block, Index: int(h.Index), K: int(h.K), R: int(h.R), MaxLen: int(h.MaxLen)}
}

// FECStats are a bond's FEC counters: what it sent and what it received.
type FECStats struct {
	Mode          string  `json:"mode"`
	CodingRate    float64 `json:"coding_rate"` // k/(k+r) over the blocks sent
	DataProtected uint64  `json:"data_protected"`
	ParitySent    uint64  `json:"parity_sent"`
	ParitySkipped uint64  `json:"parity_skipped"` // not queued: no path had congestion-window room
	BlocksByK     uint64  `json:"blocks_by_k"`
	BlocksByTimer uint64  `json:"blocks_by_timer"`

	ParityReceived uint64  `json:"parity_received"`
	Recovered      uint64  `json:"recovered"`     // data packets reconstructed and delivered
	Lost           uint64  `json:"lost"`          // data packets missing when their block timed out
	ResidualLoss   float64 `json:"residual_loss"` // Lost / (data + recovered + lost) received in blocks
	Duplicates     uint64  `json:"duplicates"`    // late originals of reconstructed packets, spare parity
	// Masked counts the reconstructed data packets whose original arrived
	// later (FEC masked their delay, not a loss; paper 1 §5), and
	// MaskedLead how much earlier the reconstruction delivered them
	// (fec.DecoderStats.Masked).
	Masked     uint64            `json:"masked"`
	MaskedLead fec.LeadHistogram `json:"masked_lead"`
	// Corrupt counts reconstructions discarded because their inputs were
	// inconsistent (fec.ReasonCorrupt). A received datagram with bad FEC
	// fields is a drop of the bond (DropBadFEC), not counted here.
	Corrupt uint64 `json:"corrupt"`
}

func (b *Bond) fecStats() *FECStats {
	s := &FECStats{Mode: FECOff, CodingRate: 1}
	if b.fecTx != nil {
		es := b.fecTx.enc.Stats()
		s.Mode, s.CodingRate, s.DataProtected, s.ParitySent = b.fecTx.opts.Mode, es.CodingRate(), es.Data, es.Parity
		s.BlocksByK, s.BlocksByTimer = es.BlocksByK, es.BlocksByTimer
		s.ParitySkipped = b.drops.get(DropParitySkipped)
		s.ParitySent -= min(s.ParitySent, s.ParitySkipped)
		if total := s.DataProtected + s.ParitySent; total > 0 {
			s.CodingRate = float64(s.DataProtected) / float64(total)
		}
	}
	ds := b.dec.Stats()
	s.ParityReceived, s.Recovered, s.Lost, s.ResidualLoss = ds.Parity, ds.Recovered, ds.Lost, ds.ResidualLoss()
	s.Duplicates, s.Corrupt = ds.Duplicates, ds.Reasons[fec.ReasonCorrupt]
	s.Masked, s.MaskedLead = ds.Masked.Count, ds.Masked
	return s
}
