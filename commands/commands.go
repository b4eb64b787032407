// Package commands is admission's composition root: it builds the command pipeline
// (package admission) with every verb family's handlers (nodes, resources, pools,
// volumes, tokens, kv). A reader finds a verb by its aggregate in the family's package
// and the pipeline in one place.
package commands

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/commands/files"
	"github.com/cairn-io/cairn/commands/kv"
	"github.com/cairn-io/cairn/commands/nodes"
	"github.com/cairn-io/cairn/commands/pools"
	"github.com/cairn-io/cairn/commands/remotes"
	"github.com/cairn-io/cairn/commands/replicas"
	"github.com/cairn-io/cairn/commands/resources"
	"github.com/cairn-io/cairn/commands/tokens"
	"github.com/cairn-io/cairn/commands/volumes"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// Options tune admission and the verbs. Zero values take the defaults in parentheses.
type Options struct {
	admission.Options
	// Ports and Minors are the ranges DRBD TCP ports (per definition) and device minors
	// (per node) are allocated from (7000-7999, 1000-49999).
	Ports, Minors replicas.Range
	// PoolFailoverTimeout: how long a pool's owner must be offline before its grant may
	// move to another node (30 s).
	PoolFailoverTimeout time.Duration
	// Seal seals remotes' secret keys (nil: remote.create is refused).
	Seal remotes.Sealer
}

// Handlers are every verb's handlers. busy reports the claims of commands under way in
// this process (admission's Busy; nil: none).
func Handlers(opts Options, busy func(subject string) bool) []decide.Handler {
	var out []decide.Handler
	out = append(out, nodes.Handlers()...)
	out = append(out, resources.Handlers(resources.Config{Ports: opts.Ports, Minors: opts.Minors, Busy: busy})...)
	out = append(out, pools.Handlers(pools.Config{FailoverTimeout: opts.PoolFailoverTimeout, Now: opts.Now})...)
	out = append(out, volumes.Handlers()...)
	out = append(out, tokens.Handlers()...)
	out = append(out, lostHandler(resources.Config{Ports: opts.Ports, Minors: opts.Minors, Busy: busy}))
	out = append(out, remotes.Handlers(opts.Seal)...)
	out = append(out, files.Handlers()...)
	return append(out, kv.Handlers()...)
}

// lostHandler decides node.lost (LINSTOR's node lost): a node gone for good leaves the
// cluster with every replica it held, in one decision, so it is all or nothing: when the
// node's removal is refused (a failure-domain rule, the online hosts), no replica is
// removed either. Its read set is both parts'.
func lostHandler(cfg resources.Config) decide.Handler {
	return decide.Handler{Verb: "node.lost", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
		var c nodes.NodeRemove
		if err := decide.DecodeBody(body, &c); err != nil {
			return decide.Decision{}, err
		}
		r := decide.NewReads(v, names)
		removal, err := nodes.DecideLostNodeRemoval(r, c)
		removal = r.Decide(removal)
		if err != nil {
			return removal, err
		}
		replicas, err := resources.RemoveLostReplicas(v, names, cfg, c.Name)
		// The replicas go first: the node's removal follows them in the same append.
		return decide.Merge(replicas, removal), err
	}}
}

// New returns admission over the store, the views and the projector that feeds them,
// answering every verb.
func New(store *events.Store, db *projections.DB, proj *projections.Projector, log zerolog.Logger, opts Options) *admission.Admission {
	a := admission.New(store, db, proj, log, opts.Options)
	for _, h := range Handlers(opts, a.Busy) {
		a.Register(h)
	}
	return a
}

// NewMemory returns an empty in-memory admission (admission.Memory) for the deployment
// prefix answering every verb. It runs one command at a time, so no claim is ever
// under way.
func NewMemory(prefix string, opts Options) (*admission.Memory, error) {
	return admission.NewMemory(prefix, opts.Options, Handlers(opts, nil))
}
