package drbd

// Voters counts the replicas that take part in DRBD's quorum: every replica. DRBD 9
// counts a diskless peer as a tiebreaker between the diskful ones, which is why the
// control plane adds no tiebreaker when an operator's diskless replica is already there
// (commands/replicas.NeedsTiebreaker): two disks and one diskless replica are three
// voters either way.
func Voters(replicas []Replica) int { return len(replicas) }

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
