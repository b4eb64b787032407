package resources

import (
	"github.com/cairn-io/cairn/commands/replicas"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// SpaceInfo is how much a group's next spawn could take: the nodes and pools autoplace
// would choose now for the group's place count (Next), the largest volume all of them
// can hold (MaxVolumeKiB: the least free of the chosen pools), and the least free and
// least total capacity among them (AvailableKiB, CapacityKiB: what one more replicated
// volume of the group sees, as linstor-proxmox reports a storage). Short is autoplace's
// refusal when fewer nodes qualify than the place count; the sizes are 0 then.
type SpaceInfo struct {
	MaxVolumeKiB uint64
	AvailableKiB uint64
	CapacityKiB  uint64
	Next         []replicas.Choice
	Short        error
}

// GroupSpaceInfo answers LINSTOR's query-size-info for group on v: autoplace of the
// group's place count (2 without one) with its rules, for a volume of 1 KiB, among the
// nodes as placement sees them (cordoned and offline nodes, pools their agents cannot
// use and pools without a capacity left out). Errors: not_found for an unknown group,
// precondition_failed without a cluster.
func GroupSpaceInfo(v *projections.View, group string) (SpaceInfo, error) {
	p, err := newResourcePlan(v, events.Names{}, Config{})
	if err != nil {
		return SpaceInfo{}, err
	}
	if err := p.loadGroup(group); err != nil {
		return SpaceInfo{}, err
	}
	count := p.group.PlaceCount
	if count <= 0 {
		count = 2
	}
	cands, err := p.candidates()
	if err != nil {
		return SpaceInfo{}, err
	}
	choices, err := replicas.Autoplace(p.rules(), 1, count, nil, cands)
	if err != nil {
		return SpaceInfo{Short: err}, nil
	}
	out := SpaceInfo{Next: choices}
	for i, c := range choices {
		if i == 0 || c.Pool.FreeKiB < out.AvailableKiB {
			out.AvailableKiB = c.Pool.FreeKiB
		}
		if i == 0 || c.Pool.TotalKiB < out.CapacityKiB {
			out.CapacityKiB = c.Pool.TotalKiB
		}
	}
	out.MaxVolumeKiB = out.AvailableKiB
	return out, nil
}
