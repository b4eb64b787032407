package drbd

// Voters counts the replicas that vote in DRBD's quorum: every diskful replica and
// every tiebreaker. A plain diskless client (Diskless without Tiebreaker) does not
// count: the control plane never adds one to win a vote.
func Voters(replicas []Replica) int {
	n := 0
	for _, r := range replicas {
		if !r.Diskless || r.Tiebreaker {
			n++
		}
	}
	return n
}

// QuorumPolicy returns Cairn's default quorum options for a resource with the given
// number of voters (see Voters): with 3 or more voters quorum majority and
// on-no-quorum io-error, so that a partitioned minority fails I/O instead of diverging;
// with fewer, quorum off (two voters cannot form a majority after losing one) and
// on-no-quorum left to DRBD's default.
//
// The result is meant as the broadest level of Resolve, so any level that sets quorum
// or on_no_quorum explicitly overrides it:
//
//	Resolve(QuorumPolicy(Voters(replicas)), controller, group, definition, resource)
func QuorumPolicy(voters int) Options {
	if voters >= 3 {
		return Options{Quorum: Ptr("majority"), OnNoQuorum: Ptr("io-error")}
	}
	return Options{Quorum: Ptr("off")}
}

// WithQuorumPolicy resolves the quorum defaults for replicas under already resolved
// options o: the options o sets win, the policy fills in what o leaves unset.
func WithQuorumPolicy(o Options, replicas []Replica) Options {
	return Resolve(QuorumPolicy(Voters(replicas)), o)
}
