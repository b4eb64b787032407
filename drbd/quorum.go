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

// LINSTOR's DrbdOptions/auto-quorum: how the control plane manages a resource's quorum.
const (
	// AutoQuorumIOError (the default, also for ""): QuorumPolicy.
	AutoQuorumIOError = "io-error"
	// AutoQuorumSuspendIO: QuorumPolicy with on-no-quorum suspend-io, so a partitioned
	// minority freezes I/O until quorum returns instead of failing it.
	AutoQuorumSuspendIO = "suspend-io"
	// AutoQuorumDisabled: no quorum policy; only what some level sets explicitly.
	AutoQuorumDisabled = "disabled"
	// AutoQuorumKey is the property that carries it (controller, group or definition).
	AutoQuorumKey = "DrbdOptions/auto-quorum"
)

// ValidAutoQuorum reports whether v is a value DrbdOptions/auto-quorum takes.
func ValidAutoQuorum(v string) bool {
	return v == AutoQuorumIOError || v == AutoQuorumSuspendIO || v == AutoQuorumDisabled
}

// WithQuorumPolicy resolves the quorum defaults for replicas under already resolved
// options o, as autoQuorum says (AutoQuorumIOError, AutoQuorumSuspendIO,
// AutoQuorumDisabled; "" or anything else is the default): the options o sets win, the
// policy fills in what o leaves unset.
func WithQuorumPolicy(o Options, replicas []Replica, autoQuorum string) Options {
	policy := QuorumPolicy(Voters(replicas))
	switch autoQuorum {
	case AutoQuorumDisabled:
		return Resolve(o)
	case AutoQuorumSuspendIO:
		if policy.OnNoQuorum != nil {
			policy.OnNoQuorum = Ptr("suspend-io")
		}
	}
	return Resolve(policy, o)
}
