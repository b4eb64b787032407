package drbd

// TEMPORARY: replaced by the drbd library's PlanSeeds/NewDay0GI/Resolve at merge.

import (
	"encoding/binary"
	"fmt"
	"io"
)

type SeedVolume struct {
	Number int
	Day0GI string
	First  bool
}

type SeedInput struct {
	NodeID           int
	Provider         Provider
	Volumes          []SeedVolume
	ForceInitialSync bool
	FromDiskless     bool
	Rand             io.Reader
}

type UUID uint64

func (g UUID) String() string { return fmt.Sprintf("%016X", uint64(g)) }

func NewDay0GI(r io.Reader, avoid ...UUID) (UUID, error) {
	for {
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, err
		}
		v := binary.BigEndian.Uint64(b[:]) &^ 1
		if v != 0 && v != 4 {
			return UUID(v), nil
		}
	}
}

func PlanSeeds(in SeedInput) ([]Seed, bool, error) {
	var out []Seed
	full := false
	for _, v := range in.Volumes {
		if !v.First && (!in.Provider.ZeroesUnwritten() || in.ForceInitialSync || in.FromDiskless) {
			full = true
			continue
		}
		cur := v.Day0GI
		if v.First {
			g, err := NewDay0GI(in.Rand)
			if err != nil {
				return nil, false, err
			}
			cur = g.String()
		}
		for id := 0; id <= 31; id++ {
			gi := v.Day0GI + ":::::"
			if v.First {
				gi = ":" + v.Day0GI + "::::"
			}
			if id == in.NodeID {
				if v.First {
					gi = cur + ":" + v.Day0GI + ":::1:1"
				} else {
					gi = cur + "::::1:1"
				}
			}
			out = append(out, Seed{Volume: v.Number, NodeID: id, GI: gi})
		}
	}
	return out, full, nil
}

func Resolve(levels ...Options) Options {
	var out Options
	for _, l := range levels {
		if l.Protocol != nil {
			out.Protocol = l.Protocol
		}
		if l.AllowTwoPrimaries != nil {
			out.AllowTwoPrimaries = l.AllowTwoPrimaries
		}
		if l.MaxBuffers != nil {
			out.MaxBuffers = l.MaxBuffers
		}
		if l.AutoPromote != nil {
			out.AutoPromote = l.AutoPromote
		}
		if l.Quorum != nil {
			out.Quorum = l.Quorum
		}
		if l.OnNoQuorum != nil {
			out.OnNoQuorum = l.OnNoQuorum
		}
		if l.OnIOError != nil {
			out.OnIOError = l.OnIOError
		}
		if l.ALExtents != nil {
			out.ALExtents = l.ALExtents
		}
		for k, v := range l.Extra {
			if out.Extra == nil {
				out.Extra = map[string]string{}
			}
			out.Extra[k] = v
		}
	}
	return out
}

func WithQuorumPolicy(o Options, replicas []Replica) Options {
	n := len(replicas)
	q := Options{}
	if n >= 3 {
		m, e := "majority", "io-error"
		q.Quorum, q.OnNoQuorum = &m, &e
	} else {
		off := "off"
		q.Quorum = &off
	}
	return Resolve(q, o)
}
