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
	got := WithQuorumPolicy(Options{}, replicas)
	if got.Quorum == nil || *got.Quorum != "majority" || got.OnNoQuorum == nil || *got.OnNoQuorum != "io-error" {
		t.Fatalf("2 diskful + tiebreaker: got %s, want quorum majority, on-no-quorum io-error", jsonOf(t, got))
	}
}
