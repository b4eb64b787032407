package drbdutils

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-io/cairn/drbd"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/storage/backing"
)

// layout builds the Desired of resource res on node "n<local>" for replicas on nodes
// n0..n<k>; kind[i] is "d" (diskful), "t" (tiebreaker) or "c" (diskless client).
// Replica i has node id i, host h<i>, address 10.0.0.<i+1>, minor 1000+v per volume.
func layout(res string, local int, kinds string, volumes int) drbd.Desired {
	d := drbd.Desired{Resource: res, Node: fmt.Sprintf("n%d", local), Revision: 7, Active: true, Port: 7000}
	for v := 0; v < volumes; v++ {
		d.Volumes = append(d.Volumes, drbd.Volume{Number: v, SizeKiB: 1 << 20, Day0GI: "1234567890ABCDE0"})
	}
	for i, k := range kinds {
		r := drbd.Replica{Node: fmt.Sprintf("n%d", i), Host: fmt.Sprintf("h%d", i), Address: fmt.Sprintf("10.0.0.%d", i+1), NodeID: i,
			Diskless: k != 'd', Tiebreaker: k == 't', Minors: map[int]int{}}
		for v := 0; v < volumes; v++ {
			r.Minors[v] = 1000 + v
		}
		d.Replicas = append(d.Replicas, r)
		if i == local {
			d.Local = &drbd.Local{NodeID: i, Diskless: r.Diskless, Provider: backing.ProviderZFSThin, Pool: "tank", Incarnation: 5}
		}
	}
	return d
}

func disksFor(res string, volumes int) map[int]string {
	m := map[int]string{}
	for v := 0; v < volumes; v++ {
		m[v] = fmt.Sprintf("/dev/zvol/tank/%s_%05d", res, v)
	}
	return m
}

func TestRenderGolden(t *testing.T) {
	d := layout("pvc-1", 0, "ddt", 2)
	d.Options = drbd.Options{
		AutoPromote: drbd.Ptr(false), Quorum: drbd.Ptr("majority"), OnNoQuorum: drbd.Ptr("io-error"),
		Protocol: drbd.Ptr("C"), MaxBuffers: drbd.Ptr(8000), OnIOError: drbd.Ptr("detach"),
		Extra: map[string]string{"DrbdOptions/Net/ping-timeout": "10", "DrbdOptions/PeerDevice/c-max-rate": "4096M",
			"DrbdOptions/Resource/twopc-timeout": "300"},
	}
	got, err := Render(d, disksFor("pvc-1", 2))
	if err != nil {
		t.Fatal(err)
	}
	want := `# DRBD resource pvc-1 on node n0. Written by Cairn; local changes are overwritten.
resource "pvc-1" {
    options {
        auto-promote no;
        quorum majority;
        on-no-quorum io-error;
        twopc-timeout 300;
    }
    net {
        protocol C;
        max-buffers 8000;
        ping-timeout 10;
    }
    disk {
        on-io-error detach;
        c-max-rate 4096M;
    }
    on "h0" {
        node-id 0;
        address ipv4 10.0.0.1:7000;
        volume 0 {
            device minor 1000;
            disk "/dev/zvol/tank/pvc-1_00000";
            meta-disk internal;
        }
        volume 1 {
            device minor 1001;
            disk "/dev/zvol/tank/pvc-1_00001";
            meta-disk internal;
        }
    }
    on "h1" {
        node-id 1;
        address ipv4 10.0.0.2:7000;
        volume 0 {
            device minor 1000;
            disk "/dev/drbd/this/is/not/used";
            meta-disk internal;
        }
        volume 1 {
            device minor 1001;
            disk "/dev/drbd/this/is/not/used";
            meta-disk internal;
        }
    }
    on "h2" {
        node-id 2;
        address ipv4 10.0.0.3:7000;
        volume 0 {
            device minor 1000;
            disk none;
        }
        volume 1 {
            device minor 1001;
            disk none;
        }
    }
    connection-mesh {
        hosts "h0" "h1" "h2";
    }
}
`
	if string(got) != want {
		t.Fatalf("Render:\n%s\nwant:\n%s", got, want)
	}
}

func TestRenderIsDeterministic(t *testing.T) {
	d := layout("r", 1, "dddd", 3)
	d.Options.Extra = map[string]string{"DrbdOptions/Net/b-opt": "1", "DrbdOptions/Net/a-opt": "2", "DrbdOptions/Disk/z": "3"}
	first, err := Render(d, disksFor("r", 3))
	if err != nil {
		t.Fatal(err)
	}
	// Reverse the replicas and volumes: the output must not change.
	for i, j := 0, len(d.Replicas)-1; i < j; i, j = i+1, j-1 {
		d.Replicas[i], d.Replicas[j] = d.Replicas[j], d.Replicas[i]
	}
	for i, j := 0, len(d.Volumes)-1; i < j; i, j = i+1, j-1 {
		d.Volumes[i], d.Volumes[j] = d.Volumes[j], d.Volumes[i]
	}
	for n := 0; n < 20; n++ {
		again, err := Render(d, disksFor("r", 3))
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(first) {
			t.Fatalf("render %d differs:\n%s\nfirst:\n%s", n, again, first)
		}
	}
}

func TestRenderLocalDiskless(t *testing.T) {
	d := layout("r", 2, "ddt", 1)
	got, err := Render(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	on := string(got)[strings.Index(string(got), `on "h2"`):]
	if !strings.Contains(on, "disk none;") || strings.Contains(on, "/dev/zvol") {
		t.Fatalf("local tiebreaker section should say disk none:\n%s", got)
	}
}

func TestRenderIPv6(t *testing.T) {
	d := layout("r", 0, "dd", 1)
	d.Replicas[1].Address = "fd00::2"
	got, err := Render(d, disksFor("r", 1))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "address ipv6 [fd00::2]:7000;") {
		t.Fatalf("no ipv6 address in\n%s", got)
	}
}

func TestRenderRefusesImpossibleInput(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(d *drbd.Desired, disks map[int]string)
		field  string
		msg    string
	}{
		{"no local", func(d *drbd.Desired, _ map[int]string) { d.Local = nil }, "local", "has no local replica"},
		{"no replica on the node", func(d *drbd.Desired, _ map[int]string) { d.Node = "n9" }, "replicas", "no replica is on node n9"},
		{"local node id differs", func(d *drbd.Desired, _ map[int]string) { d.Local.NodeID = 5 }, "replicas[0].node_id", "local.node_id is 5"},
		{"duplicate node id", func(d *drbd.Desired, _ map[int]string) { d.Replicas[2].NodeID = 1 }, "replicas[2].node_id", "node id 1 is already used by replicas[1]"},
		{"node id out of range", func(d *drbd.Desired, _ map[int]string) { d.Replicas[1].NodeID = 32 }, "replicas[1].node_id", "node id must be 0..31"},
		{"duplicate host", func(d *drbd.Desired, _ map[int]string) { d.Replicas[2].Host = "h1" }, "replicas[2].host", "host h1 is already used"},
		{"bad host", func(d *drbd.Desired, _ map[int]string) { d.Replicas[1].Host = `h"1` }, "replicas[1].host", "must be a host name"},
		{"bad address", func(d *drbd.Desired, _ map[int]string) { d.Replicas[1].Address = "10.0.0" }, "replicas[1].address", "IPv4 or IPv6"},
		{"missing minor", func(d *drbd.Desired, _ map[int]string) { delete(d.Replicas[1].Minors, 1) }, "replicas[1].minors[1]", "no minor for volume 1"},
		{"duplicate minor on a host", func(d *drbd.Desired, _ map[int]string) { d.Replicas[0].Minors[1] = 1000 }, "replicas[0].minors[1]", "minor 1000 is already used by volume 0"},
		{"minor out of range", func(d *drbd.Desired, _ map[int]string) { d.Replicas[0].Minors[0] = 1 << 20 }, "replicas[0].minors[0]", "minor must be 0..1048575"},
		{"missing local disk", func(_ *drbd.Desired, disks map[int]string) { delete(disks, 1) }, "local_disks[1]", "no backing disk for volume 1"},
		{"relative local disk", func(_ *drbd.Desired, disks map[int]string) { disks[0] = "dev/sda" }, "local_disks[0]", "absolute device path"},
		{"local disk with a quote", func(_ *drbd.Desired, disks map[int]string) { disks[0] = `/dev/a";` }, "local_disks[0]", "absolute device path"},
		{"diskless mismatch", func(d *drbd.Desired, _ map[int]string) { d.Local.Diskless = true }, "local.diskless", "local.diskless is true"},
		{"no volumes", func(d *drbd.Desired, _ map[int]string) { d.Volumes = nil }, "volumes", "has no volumes"},
		{"duplicate volume", func(d *drbd.Desired, _ map[int]string) { d.Volumes[1].Number = 0 }, "volumes", "volume number 0 is used twice"},
		{"bad port", func(d *drbd.Desired, _ map[int]string) { d.Port = 0 }, "port", "port must be 1..65535"},
		{"bad resource name", func(d *drbd.Desired, _ map[int]string) { d.Resource = "r 1" }, "resource", "resource name"},
		{"bad option", func(d *drbd.Desired, _ map[int]string) { d.Options.Protocol = drbd.Ptr("D") }, "options.protocol", "protocol must be A, B or C"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := layout("r", 0, "ddt", 2)
			disks := disksFor("r", 2)
			tt.mutate(&d, disks)
			out, err := Render(d, disks)
			if err == nil {
				t.Fatalf("Render succeeded:\n%s", out)
			}
			if fe := cairn.FieldError(err, tt.field); fe == nil || !strings.Contains(fe.Message, tt.msg) {
				t.Fatalf("Render error %v does not name field %s with %q", err, tt.field, tt.msg)
			}
		})
	}
}
