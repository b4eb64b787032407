package drbdagent

import (
	"reflect"
	"testing"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/storage/backing"
	"github.com/stretchr/testify/assert"
)

func desired(inc, rev uint64, diskless, active bool, peers ...string) *drbd.Desired {
	d := &drbd.Desired{Resource: "r1", Node: "n1", Revision: rev, Active: active,
		Replicas: []drbd.Replica{{Node: "n1", NodeID: 0, Diskless: diskless}},
		Local:    &drbd.Local{NodeID: 0, Diskless: diskless, Incarnation: inc, Provider: backing.ProviderFileThin}}
	for i, p := range peers {
		d.Replicas = append(d.Replicas, drbd.Replica{Node: p, NodeID: i + 1})
	}
	return d
}

func TestDecide(t *testing.T) {
	disks := map[int]string{0: "/d"}
	tests := []struct {
		name      string
		d         *drbd.Desired
		st        *State
		installed bool
		want      Plan
	}{
		{"nothing desired, nothing here", nil, nil, false, Plan{}},
		{"removal of an adjusted resource", nil, &State{Incarnation: 5, Adjusted: true}, true, Plan{Remove: true, Down: true}},
		{"removal before adjust: no down", nil, &State{Incarnation: 5, MDCreated: true}, false, Plan{Remove: true}},
		{"removal of a file without state", nil, nil, true, Plan{Remove: true, Down: true}},
		{"Local nil is a removal", &drbd.Desired{Resource: "r1"}, &State{Incarnation: 5, Adjusted: true}, true, Plan{Remove: true, Down: true}},
		{"fresh diskful", desired(5, 5, false, true), nil, false, Plan{Backing: true, CreateMD: true, Seed: true, Adjust: true}},
		{"crash between create-md and set-gi: seed again, no create-md", desired(5, 5, false, true),
			&State{Incarnation: 5, MDCreated: true, Disks: disks}, false, Plan{Backing: true, Seed: true, Adjust: true}},
		{"crash between set-gi and adjust: adjust only", desired(5, 5, false, true),
			&State{Incarnation: 5, MDCreated: true, Seeded: true, Disks: disks}, true, Plan{Backing: true, Adjust: true}},
		{"crash during adjust (adjusted written first): never seed again", desired(5, 5, false, true),
			&State{Incarnation: 5, MDCreated: true, Adjusted: true, Disks: disks}, true, Plan{Backing: true, Adjust: true}},
		{"older incarnation ignored", desired(4, 9, false, true), &State{Incarnation: 5, Revision: 5}, true,
			Plan{Ignore: "desired incarnation 4 is older than incarnation 5 on this node"}},
		{"older revision ignored", desired(5, 6, false, true), &State{Incarnation: 5, Revision: 7}, true,
			Plan{Ignore: "desired revision 6 is older than revision 7 carried out"}},
		{"newer incarnation retires an adjusted diskful one", desired(9, 9, false, true),
			&State{Incarnation: 5, MDCreated: true, Seeded: true, Adjusted: true, Disks: disks}, true,
			Plan{Retire: &State{Incarnation: 5, MDCreated: true, Seeded: true, Adjusted: true, Disks: disks}, RetireDown: true,
				Backing: true, CreateMD: true, Seed: true, Adjust: true}},
		{"tiebreaker promoted: new incarnation, no down (no disk to wipe)", desired(9, 9, false, true),
			&State{Incarnation: 5, Diskless: true, Adjusted: true}, true,
			Plan{Retire: &State{Incarnation: 5, Diskless: true, Adjusted: true}, Backing: true, CreateMD: true, Seed: true, Adjust: true}},
		{"toggled to diskless: drop the disks after adjust", desired(5, 8, true, true),
			&State{Incarnation: 5, MDCreated: true, Seeded: true, Adjusted: true, Disks: disks}, true, Plan{Adjust: true, DropDisks: true}},
		{"deactivated: down, keep everything", desired(5, 8, false, false),
			&State{Incarnation: 5, MDCreated: true, Seeded: true, Adjusted: true, Disks: disks}, true, Plan{Backing: true, Down: true}},
		{"deactivated before it was ever up: nothing to take down", desired(5, 8, false, false), nil, false,
			Plan{Backing: true, CreateMD: true, Seed: true}},
		{"adjusted without metadata: refused", desired(5, 8, false, true), &State{Incarnation: 5, Adjusted: true}, true,
			Plan{Refuse: "incarnation 5 was adjusted diskless or without metadata; a disk needs a new incarnation (replica.toggle-disk)"}},
		{"a peer left: forget it", desired(5, 8, false, true, "n2"),
			&State{Incarnation: 5, MDCreated: true, Seeded: true, Adjusted: true, Disks: disks, Peers: map[int]string{1: "n2", 2: "n3"}}, true,
			Plan{Backing: true, Adjust: true, Forget: []int{2}}},
		{"deactivated: a peer that left is forgotten only once it is up again", desired(5, 8, false, false, "n2"),
			&State{Incarnation: 5, MDCreated: true, Seeded: true, Adjusted: true, Disks: disks, Peers: map[int]string{1: "n2", 2: "n3"}}, true,
			Plan{Backing: true, Down: true}},
		{"a node id now names another node: forget it", desired(5, 8, false, true, "n4"),
			&State{Incarnation: 5, MDCreated: true, Seeded: true, Adjusted: true, Disks: disks, Peers: map[int]string{1: "n2"}}, true,
			Plan{Backing: true, Adjust: true, Forget: []int{1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.d, tt.st, tt.installed)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Decide:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestLeftPeers: a peer that left, whose node id went to another node, or that came
// back as a new incarnation under the same node id, is forgotten; a state file written
// before desired states named incarnations does not forget live peers.
func TestLeftPeers(t *testing.T) {
	d := func(peers ...drbd.Replica) *drbd.Desired {
		return &drbd.Desired{Node: "n1", Replicas: append([]drbd.Replica{{Node: "n1", NodeID: 0}}, peers...)}
	}
	cases := []struct {
		name    string
		was     map[int]string
		desired *drbd.Desired
		want    []int
	}{
		{"unchanged", map[int]string{1: "n2#7"}, d(drbd.Replica{Node: "n2", NodeID: 1, Incarnation: 7}), nil},
		{"gone", map[int]string{1: "n2#7", 2: "n3#9"}, d(drbd.Replica{Node: "n2", NodeID: 1, Incarnation: 7}), []int{2}},
		{"node id reused by another node", map[int]string{1: "n2#7"}, d(drbd.Replica{Node: "n3", NodeID: 1, Incarnation: 12}), []int{1}},
		{"removed and added again under the same node id", map[int]string{1: "n2#7"}, d(drbd.Replica{Node: "n2", NodeID: 1, Incarnation: 15}), []int{1}},
		{"old state file without incarnations", map[int]string{1: "n2"}, d(drbd.Replica{Node: "n2", NodeID: 1, Incarnation: 15}), nil},
		{"desired state without incarnations", map[int]string{1: "n2#7"}, d(drbd.Replica{Node: "n2", NodeID: 1}), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := leftPeers(c.was, c.desired); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("leftPeers = %v, want %v", got, c.want)
			}
		})
	}
}

// Steps names what a plan changes, and nothing for a plan that changes nothing.
func TestPlanSteps(t *testing.T) {
	assert.Empty(t, Plan{Backing: true, Adjust: true}.Steps(false), "an existing disk, an unchanged file: no news")
	assert.Equal(t, []string{"create metadata", "seed the generation identifiers", "adjust to a new resource file"},
		Plan{Backing: true, CreateMD: true, Seed: true, Adjust: true}.Steps(true))
	assert.Equal(t, []string{"tear down"}, Plan{Remove: true, Down: true}.Steps(true)[:1])
	assert.Equal(t, []string{"drop the disks", "forget peers [2]"}, Plan{DropDisks: true, Forget: []int{2}}.Steps(false))
}

// Decide's growth rules: grow the backing whose recorded size is below the Desired's,
// resize DRBD (only while active) for what grew and was not resized since; a state from
// before resizes (no sizes recorded) and a diskless replica grow nothing.
func TestDecideGrowth(t *testing.T) {
	sized := func(active bool, size uint64) *drbd.Desired {
		d := desired(5, 9, false, active, "n2")
		d.Volumes = []drbd.Volume{{Number: 0, SizeKiB: size}, {Number: 1, SizeKiB: 4096}}
		return d
	}
	up := func(sizes, resized map[int]uint64) *State {
		return &State{Incarnation: 5, Revision: 8, MDCreated: true, Seeded: true, Adjusted: true,
			Disks: map[int]string{0: "/d0", 1: "/d1"}, Sizes: sizes, Resized: resized}
	}
	tests := []struct {
		name         string
		d            *drbd.Desired
		st           *State
		grow, resize []int
	}{
		{"volume 0 grew", sized(true, 8192), up(map[int]uint64{0: 4096, 1: 4096}, map[int]uint64{0: 4096, 1: 4096}), []int{0}, []int{0}},
		{"grown before a crash, not resized", sized(true, 8192), up(map[int]uint64{0: 8192, 1: 4096}, map[int]uint64{0: 4096, 1: 4096}), nil, []int{0}},
		{"inactive: grow, resize at activation", sized(false, 8192), up(map[int]uint64{0: 4096, 1: 4096}, map[int]uint64{0: 4096, 1: 4096}), []int{0}, nil},
		{"nothing grew", sized(true, 4096), up(map[int]uint64{0: 4096, 1: 4096}, map[int]uint64{0: 4096, 1: 4096}), nil, nil},
		{"an older, smaller size shrinks nothing", sized(true, 2048), up(map[int]uint64{0: 4096, 1: 4096}, map[int]uint64{0: 4096, 1: 4096}), nil, nil},
		{"state from before resizes", sized(true, 8192), up(nil, nil), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(tt.d, tt.st, true)
			assert.Equal(t, tt.grow, p.Grow, "grow")
			assert.Equal(t, tt.resize, p.Resize, "resize")
		})
	}
	d := sized(true, 8192)
	d.Local.Diskless = true
	p := Decide(d, &State{Incarnation: 5, Adjusted: true, Diskless: true}, true)
	assert.Nil(t, p.Grow)
	assert.Nil(t, p.Resize)
}
