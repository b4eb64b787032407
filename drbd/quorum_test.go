package drbd

import (
	"reflect"
	"testing"
)

func TestVoters(t *testing.T) {
	diskful := Replica{}
	tiebreaker := Replica{Diskless: true, Tiebreaker: true}
	client := Replica{Diskless: true}
	tests := []struct {
		name     string
		replicas []Replica
		want     int
	}{
		{"none", nil, 0},
		{"two diskful", []Replica{diskful, diskful}, 2},
		{"two diskful and a tiebreaker", []Replica{diskful, diskful, tiebreaker}, 3},
		{"two diskful and a client: the client breaks ties", []Replica{diskful, diskful, client}, 3},
		{"three diskful and a client", []Replica{diskful, diskful, diskful, client}, 4},
	}
	for _, tt := range tests {
		if got := Voters(tt.replicas); got != tt.want {
			t.Errorf("%s: Voters = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestQuorumPolicy(t *testing.T) {
	majority := Options{Quorum: Ptr("majority"), OnNoQuorum: Ptr("io-error")}
	off := Options{Quorum: Ptr("off")}
	tests := []struct {
		name     string
		voters   int
		explicit Options
		want     Options
	}{
		{"one voter", 1, Options{}, off},
		{"two voters", 2, Options{}, off},
		{"three voters", 3, Options{}, majority},
		{"four voters", 4, Options{}, majority},
		{"explicit quorum off with three voters", 3, Options{Quorum: Ptr("off")},
			Options{Quorum: Ptr("off"), OnNoQuorum: Ptr("io-error")}},
		{"explicit suspend-io with three voters", 3, Options{OnNoQuorum: Ptr("suspend-io")},
			Options{Quorum: Ptr("majority"), OnNoQuorum: Ptr("suspend-io")}},
		{"explicit quorum majority with two voters", 2, Options{Quorum: Ptr("majority")},
			Options{Quorum: Ptr("majority")}},
		{"unrelated options are kept", 3, Options{Protocol: Ptr("A")},
			Options{Protocol: Ptr("A"), Quorum: Ptr("majority"), OnNoQuorum: Ptr("io-error")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Resolve(QuorumPolicy(tt.voters), tt.explicit)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %s, want %s", jsonOf(t, got), jsonOf(t, tt.want))
			}
		})
	}
}

func TestWithQuorumPolicyCountsTiebreakers(t *testing.T) {
	replicas := []Replica{{NodeID: 0}, {NodeID: 1}, {NodeID: 2, Diskless: true, Tiebreaker: true}}
	got := WithQuorumPolicy(Options{}, replicas, "")
	if got.Quorum == nil || *got.Quorum != "majority" || got.OnNoQuorum == nil || *got.OnNoQuorum != "io-error" {
		t.Fatalf("2 diskful + tiebreaker: got %s, want quorum majority, on-no-quorum io-error", jsonOf(t, got))
	}
}

// DrbdOptions/auto-quorum steers the policy: suspend-io freezes a minority instead of
// failing its I/O, disabled leaves quorum to what a level sets; a level's explicit
// option still wins over the policy.
func TestWithQuorumPolicyFollowsAutoQuorum(t *testing.T) {
	three := []Replica{{NodeID: 0}, {NodeID: 1}, {NodeID: 2}}
	str := func(p *string) string {
		if p == nil {
			return "<unset>"
		}
		return *p
	}
	for _, tt := range []struct {
		mode, quorum, onNoQuorum string
		set                      Options
	}{
		{"", "majority", "io-error", Options{}},
		{AutoQuorumIOError, "majority", "io-error", Options{}},
		{AutoQuorumSuspendIO, "majority", "suspend-io", Options{}},
		{AutoQuorumDisabled, "<unset>", "<unset>", Options{}},
		{AutoQuorumDisabled, "2", "<unset>", Options{Quorum: Ptr("2")}},
		{AutoQuorumSuspendIO, "majority", "io-error", Options{OnNoQuorum: Ptr("io-error")}},
	} {
		got := WithQuorumPolicy(Resolve(tt.set), three, tt.mode)
		if str(got.Quorum) != tt.quorum || str(got.OnNoQuorum) != tt.onNoQuorum {
			t.Errorf("auto-quorum %q over %s: quorum %s on-no-quorum %s, want %s %s", tt.mode, jsonOf(t, tt.set), str(got.Quorum), str(got.OnNoQuorum), tt.quorum, tt.onNoQuorum)
		}
	}
	two := WithQuorumPolicy(Options{}, three[:2], AutoQuorumSuspendIO)
	if str(two.Quorum) != "off" || two.OnNoQuorum != nil {
		t.Errorf("two voters with suspend-io: quorum %s on-no-quorum %s, want off and unset", str(two.Quorum), str(two.OnNoQuorum))
	}
}
