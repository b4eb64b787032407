package drbd

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestConverged(t *testing.T) {
	desired := func(mut func(*Desired)) Desired {
		d := Desired{Resource: "r1", Node: "n1", Revision: 10, Active: true,
			Replicas: []Replica{{Node: "n1", NodeID: 0}, {Node: "n2", NodeID: 1}, {Node: "n3", NodeID: 2, Diskless: true, Tiebreaker: true}},
			Volumes:  []Volume{{Number: 0}, {Number: 1}},
			Local:    &Local{NodeID: 0}}
		if mut != nil {
			mut(&d)
		}
		return d
	}
	established := []PeerVolumeStatus{{Volume: 0, Replication: "Established"}, {Volume: 1, Replication: "Established"}}
	settled := func(mut func(*Status)) *Status {
		st := &Status{Resource: "r1", Node: "n1", Revision: 10, Phase: PhaseApplied,
			Volumes: []VolumeStatus{{Volume: 0, DiskState: "UpToDate"}, {Volume: 1, DiskState: "UpToDate"}},
			Peers: []PeerStatus{{Node: "n2", NodeID: 1, Connection: "Connected", Volumes: established},
				{Node: "n3", NodeID: 2, Connection: "Connected", Volumes: established}}}
		if mut != nil {
			mut(st)
		}
		return st
	}
	for _, c := range []struct {
		name string
		d    Desired
		st   *Status
		why  string // "" when converged
	}{
		{"settled", desired(nil), settled(nil), ""},
		{"a later revision reported", desired(nil), settled(func(s *Status) { s.Revision = 12 }), ""},
		{"no report", desired(nil), nil, "n1: no report yet"},
		{"pending", desired(nil), settled(func(s *Status) { s.Phase = PhasePending }), "n1: phase pending"},
		{"failed", desired(nil), settled(func(s *Status) { s.Phase, s.Error = PhaseFailed, "drbdadm adjust: exit 10" }), "n1: failed: drbdadm adjust: exit 10"},
		{"an older revision", desired(nil), settled(func(s *Status) { s.Revision = 9 }), "n1: at revision 9 of 10"},
		{"a disk still syncing", desired(nil), settled(func(s *Status) { s.Volumes[1].DiskState = "Inconsistent" }), "n1: volume 1 Inconsistent, want UpToDate"},
		{"a volume not reported", desired(nil), settled(func(s *Status) { s.Volumes = s.Volumes[:1] }), "n1: volume 1 not reported, want UpToDate"},
		{"a peer connecting", desired(nil), settled(func(s *Status) { s.Peers[0].Connection = "Connecting" }), "n1: peer n2 Connecting"},
		{"a peer missing", desired(nil), settled(func(s *Status) { s.Peers = s.Peers[1:] }), "n1: peer n2 not reported"},
		{"a resync to a peer", desired(nil), settled(func(s *Status) {
			s.Peers[1].Volumes = []PeerVolumeStatus{{Volume: 0, Replication: "Established"}, {Volume: 1, Replication: "SyncSource"}}
		}), "n1: volume 1 to n3 SyncSource"},
		{"diskless wants Diskless", desired(func(d *Desired) { d.Local.Diskless = true }), settled(nil), "n1: volume 0 UpToDate, want Diskless"},
		{"diskless with a diskless peer not connected", desired(func(d *Desired) { d.Local.Diskless = true }), settled(func(s *Status) {
			s.Volumes = []VolumeStatus{{Volume: 0, DiskState: "Diskless"}, {Volume: 1, DiskState: "Diskless"}}
			s.Peers = s.Peers[:1]
		}), ""},
		{"inactive: applied is enough", desired(func(d *Desired) { d.Active = false }), settled(func(s *Status) { s.Volumes, s.Peers = nil, nil }), ""},
		{"leaving, report gone", desired(func(d *Desired) { d.Local = nil }), nil, ""},
		{"leaving, removed", desired(func(d *Desired) { d.Local = nil }), settled(func(s *Status) { s.Phase = PhaseRemoved }), ""},
		{"leaving, still up", desired(func(d *Desired) { d.Local = nil }), settled(nil), "n1: being removed (phase applied)"},
	} {
		ok, why := Converged(c.d, c.st)
		assert.Equal(t, c.why == "", ok, c.name)
		assert.Equal(t, c.why, why, c.name)
	}
}
