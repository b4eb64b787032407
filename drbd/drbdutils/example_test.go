package drbdutils_test

import (
	"fmt"
	"strings"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/drbd/drbdutils"
	"github.com/cairn-io/cairn/storage/backing"
)

// The agent's steps for a new replica's volume: create-md with MaxPeers, the plan's
// set-gi calls, then (not shown) render, check with drbdadm -t/-E, install, adjust.
func ExampleSeedArgv() {
	seeds, fullSync, err := drbd.PlanSeeds(drbd.SeedInput{
		NodeID:   2,
		Provider: backing.ProviderZFSThin,
		Volumes:  []drbd.SeedVolume{{Number: 0, Day0GI: "1234567890ABCDE0"}},
	})
	if err != nil {
		panic(err)
	}
	disk := "/dev/zvol/tank/r1_00000"
	fmt.Println(strings.Join(drbdutils.CreateMD(1000, disk, drbd.MaxPeers(3)), " "))
	for _, s := range seeds[:3] {
		fmt.Println(strings.Join(drbdutils.SeedArgv(1000, disk, s), " "))
	}
	fmt.Println(len(seeds), "seeds, full sync:", fullSync)
	// Output:
	// drbdmeta --force 1000 v09 /dev/zvol/tank/r1_00000 internal create-md 7
	// drbdmeta --force --node-id 0 1000 v09 /dev/zvol/tank/r1_00000 internal set-gi 1234567890ABCDE0:::::
	// drbdmeta --force --node-id 1 1000 v09 /dev/zvol/tank/r1_00000 internal set-gi 1234567890ABCDE0:::::
	// drbdmeta --force --node-id 2 1000 v09 /dev/zvol/tank/r1_00000 internal set-gi 1234567890ABCDE0::::1:1
	// 32 seeds, full sync: false
}

func ExampleRender() {
	d := drbd.Desired{
		Resource: "r1", Node: "n1", Port: 7000,
		Replicas: []drbd.Replica{
			{Node: "n1", Host: "h1", Address: "10.0.0.1", NodeID: 0, Minors: map[int]int{0: 1000}},
			{Node: "n2", Host: "h2", Address: "10.0.0.2", NodeID: 1, Minors: map[int]int{0: 1000}},
		},
		Volumes: []drbd.Volume{{Number: 0, SizeKiB: 1 << 20, Day0GI: "1234567890ABCDE0"}},
		Local:   &drbd.Local{NodeID: 0, Provider: backing.ProviderZFSThin, Pool: "tank"},
	}
	// Two voters: quorum off (see QuorumPolicy); the definition asks for protocol C.
	d.Options = drbd.WithQuorumPolicy(drbd.Resolve(drbd.Options{}, drbd.Options{Protocol: drbd.Ptr("C")}), d.Replicas, "")
	b, err := drbdutils.Render(d, map[int]string{0: "/dev/zvol/tank/r1_00000"})
	if err != nil {
		panic(err)
	}
	fmt.Print(string(b))
	// Output:
	// # DRBD resource r1 on node n1. Written by Cairn; local changes are overwritten.
	// resource "r1" {
	//     options {
	//         quorum off;
	//     }
	//     net {
	//         protocol C;
	//     }
	//     on "h1" {
	//         node-id 0;
	//         address ipv4 10.0.0.1:7000;
	//         volume 0 {
	//             device minor 1000;
	//             disk "/dev/zvol/tank/r1_00000";
	//             meta-disk internal;
	//         }
	//     }
	//     on "h2" {
	//         node-id 1;
	//         address ipv4 10.0.0.2:7000;
	//         volume 0 {
	//             device minor 1000;
	//             disk "/dev/drbd/this/is/not/used";
	//             meta-disk internal;
	//         }
	//     }
	//     connection-mesh {
	//         hosts "h1" "h2";
	//     }
	// }
}
