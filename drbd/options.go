package drbd

// Options are the DRBD options Cairn types, with pointer fields so that nil inherits
// and any set value, false and 0 included, overrides (see Resolve). Keys Cairn does not
// type travel in Extra as "DrbdOptions/<Section>/<name>" -> value and round-trip
// unchanged.
type Options struct {
	// net section
	Protocol          *string `json:"protocol,omitempty"` // A | B | C
	AllowTwoPrimaries *bool   `json:"allow_two_primaries,omitempty"`
	MaxBuffers        *int    `json:"max_buffers,omitempty"`
	// options section
	AutoPromote *bool   `json:"auto_promote,omitempty"`
	Quorum      *string `json:"quorum,omitempty"`       // off | majority | all | <n>
	OnNoQuorum  *string `json:"on_no_quorum,omitempty"` // io-error | suspend-io
	// disk section
	OnIOError *string `json:"on_io_error,omitempty"` // pass_on | call-local-io-error | detach
	ALExtents *int    `json:"al_extents,omitempty"`
	// Extra holds untyped options by their LINSTOR property name, e.g.
	// "DrbdOptions/Net/ping-timeout": "10".
	Extra map[string]string `json:"extra,omitempty"`
}
