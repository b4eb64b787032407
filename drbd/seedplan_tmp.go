package drbd

// TEMPORARY: replaced by the drbd library's PlanSeeds/NewDay0GI at merge.

import (
	"encoding/binary"
	"fmt"
	"io"
)

type SeedVolume struct {
	Volume int
	Day0GI string
}

type SeedInput struct {
	NodeID           int
	Provider         Provider
	Volumes          []SeedVolume
	First            bool
	ForceInitialSync bool
	Random           io.Reader
}

type tmpGI uint64

func (g tmpGI) String() string { return fmt.Sprintf("%016X", uint64(g)) }

func NewDay0GI(r io.Reader) (tmpGI, error) {
	for {
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, err
		}
		v := binary.BigEndian.Uint64(b[:]) &^ 1
		if v != 0 && v != 4 {
			return tmpGI(v), nil
		}
	}
}

func PlanSeeds(in SeedInput) ([]Seed, bool, error) {
	if !in.First && (!in.Provider.ZeroesUnwritten() || in.ForceInitialSync) {
		return nil, true, nil
	}
	var out []Seed
	for _, v := range in.Volumes {
		cur := v.Day0GI
		if in.First {
			g, err := NewDay0GI(in.Random)
			if err != nil {
				return nil, false, err
			}
			cur = g.String()
		}
		for id := 0; id <= 31; id++ {
			gi := v.Day0GI + ":::::"
			if in.First {
				gi = ":" + v.Day0GI + "::::"
			}
			if id == in.NodeID {
				if in.First {
					gi = cur + ":" + v.Day0GI + ":::1:1"
				} else {
					gi = cur + "::::1:1"
				}
			}
			out = append(out, Seed{Volume: v.Volume, NodeID: id, GI: gi})
		}
	}
	return out, false, nil
}
