// Package pools decides the shared zpool verbs: which node may import a pool (one at a
// time: the grant), its export, and contests raised by the MMP watch.
package pools

import (
	"fmt"
	"slices"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// DefaultPoolFailoverTimeout is how long a pool's owner must have been offline before
// pool.import may move the grant to another node.
const DefaultPoolFailoverTimeout = 30 * time.Second

// Bodies of the pool verbs.
type (
	// PoolCreate is the body of pool.create.
	PoolCreate = events.PoolCreated
	// PoolImport is the body of pool.import.
	PoolImport struct {
		Pool   string `json:"pool"`
		Node   string `json:"node"`
		Reason string `json:"reason"`
	}
	// PoolExport is the body of pool.export.
	PoolExport = PoolImport
	// PoolContest is the body of pool.contest (the fields of pool.contested).
	PoolContest events.PoolContested
)

// DecidePoolImport grants pool to target. The grant is one node at a time: refused
// (precondition_failed) while the pool is contested, while its owner is online or has
// been offline for less than failover, and for a node that is offline or cannot reach
// the pool's devices; not_found for an unknown pool or node. Granting to the owner again
// is a no-op with a warning. A grant that moves from an owner offline past the failover
// timeout says so in its reason.
func DecidePoolImport(pool *projections.Pool, target, owner *projections.Node, c PoolImport, now time.Time, failover time.Duration) (*events.PoolImportGranted, []string, error) {
	switch {
	case pool == nil:
		return nil, nil, cairn.Errorf(cairn.CodeNotFound, "pool %s does not exist", c.Pool)
	case target == nil:
		return nil, nil, cairn.Errorf(cairn.CodeNotFound, "node %s is not in the cluster", c.Node).About(cairn.ObjNode)
	case !slices.Contains(pool.Nodes, c.Node):
		return nil, nil, cairn.Errorf(cairn.CodePreconditionFailed, "node %s cannot reach pool %s's devices (nodes: %v)", c.Node, c.Pool, pool.Nodes)
	case pool.Contested:
		return nil, nil, cairn.Errorf(cairn.CodePreconditionFailed,
			"pool %s is contested (%s); make sure no host has it imported, then pool.export it before a new import", c.Pool, pool.ContestReason)
	case target.Status.State != events.StateOnline:
		return nil, nil, cairn.Errorf(cairn.CodePreconditionFailed, "node %s is %s; a pool is granted only to an online node", c.Node, target.Status.State)
	case pool.Owner == c.Node:
		return nil, []string{fmt.Sprintf("pool %s is already granted to %s; nothing changed", c.Pool, c.Node)}, nil
	}
	reason := c.Reason
	if reason == "" {
		reason = "requested"
	}
	ev := &events.PoolImportGranted{Pool: c.Pool, Node: c.Node, Reason: reason}
	if pool.Owner == "" {
		return ev, nil, nil
	}
	if owner == nil { // the owner's node left the cluster
		ev.PreviousOwner, ev.Reason = pool.Owner, fmt.Sprintf("previous owner %s left the cluster", pool.Owner)
		return ev, nil, nil
	}
	if owner.Status.State == events.StateOnline {
		return nil, nil, cairn.Errorf(cairn.CodePreconditionFailed,
			"pool %s is imported by %s, which is online; export it there first (pool.export) or wait until %s has been offline for %s",
			c.Pool, pool.Owner, pool.Owner, failover).WithDetails(map[string]any{"owner": pool.Owner, "failover_timeout": failover.String()})
	}
	offline := now.Sub(owner.Status.Since)
	if offline < failover {
		return nil, nil, cairn.Errorf(cairn.CodePreconditionFailed,
			"pool %s is imported by %s, offline for %s only; the grant moves after %s offline (in %s)",
			c.Pool, pool.Owner, offline.Round(time.Second), failover, (failover - offline).Round(time.Second)).
			WithDetails(map[string]any{"owner": pool.Owner, "offline_for": offline.String(), "failover_timeout": failover.String()})
	}
	ev.PreviousOwner = pool.Owner
	ev.Reason = fmt.Sprintf("previous owner %s offline since %s (%s, past the failover timeout %s)",
		pool.Owner, owner.Status.Since.UTC().Format(time.RFC3339), offline.Round(time.Second), failover)
	return ev, nil, nil
}

// DecidePoolExport releases pool's grant. Refuses not_found, and precondition_failed for
// a node that does not hold it; exporting a pool nobody holds is a no-op with a warning.
// An export without node clears the grant whoever holds it (an operator resolving a
// contested pool).
func DecidePoolExport(pool *projections.Pool, c PoolExport) (*events.PoolExported, []string, error) {
	switch {
	case pool == nil:
		return nil, nil, cairn.Errorf(cairn.CodeNotFound, "pool %s does not exist", c.Pool)
	case pool.Owner == "" && !pool.Contested:
		return nil, []string{fmt.Sprintf("pool %s is not granted to any node; nothing changed", c.Pool)}, nil
	case c.Node != "" && c.Node != pool.Owner:
		return nil, nil, cairn.Errorf(cairn.CodePreconditionFailed, "pool %s is granted to %s, not %s", c.Pool, pool.Owner, c.Node)
	}
	return &events.PoolExported{Pool: c.Pool, Node: pool.Owner, Reason: c.Reason}, nil, nil
}

// DecidePoolContest records that another host wrote the pool while c.Node held it.
// Refuses not_found; a report from a node that no longer holds the grant, or about a
// pool already contested, is a no-op with a warning.
func DecidePoolContest(pool *projections.Pool, c PoolContest) (*events.PoolContested, []string, error) {
	switch {
	case pool == nil:
		return nil, nil, cairn.Errorf(cairn.CodeNotFound, "pool %s does not exist", c.Pool)
	case pool.Owner != c.Node:
		return nil, []string{fmt.Sprintf("pool %s is not granted to %s (owner %q); report ignored", c.Pool, c.Node, pool.Owner)}, nil
	case pool.Contested:
		return nil, []string{fmt.Sprintf("pool %s is already contested", c.Pool)}, nil
	}
	ev := events.PoolContested(c)
	return &ev, nil, nil
}

// Config tunes the pool verbs. Zero values take the defaults in parentheses.
type Config struct {
	// FailoverTimeout: how long a pool's owner must be offline before its grant may
	// move to another node (DefaultPoolFailoverTimeout, 30 s).
	FailoverTimeout time.Duration
	Now             func() time.Time // the clock offline time is measured by (time.Now)
}

// Handlers decide the pool verbs: pool.create, pool.import, pool.export and
// pool.contest. A grant that moves away from an owner reads the owner's node, so two
// concurrent imports for different nodes cannot both be accepted.
func Handlers(cfg Config) []decide.Handler {
	if cfg.FailoverTimeout <= 0 {
		cfg.FailoverTimeout = DefaultPoolFailoverTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	node := func(v *projections.View, name string) (*projections.Node, error) {
		if name == "" {
			return nil, nil
		}
		n, ok, err := v.Node(name)
		return decide.Ptr(n, ok), err
	}
	return []decide.Handler{
		{Verb: "pool.create", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c PoolCreate
			if err := decide.DecodeBody(body, &c); err != nil {
				return decide.Decision{}, err
			}
			// Reads: the pool. The nodes it names are checked against the view, not
			// read to check: nothing keeps a node from being removed while a pool names
			// it (an import there is refused not_found then).
			r := decide.NewReads(v, names)
			if err := r.Of("pool", c.Name); err != nil {
				return decide.Decision{}, err
			}
			if _, exists, err := v.Pool(c.Name); err != nil || exists {
				if err == nil {
					err = cairn.Errorf(cairn.CodeAlreadyExists, "pool %s already exists", c.Name)
				}
				return r.Decide(decide.Decision{}), err
			}
			for _, n := range c.Nodes {
				if nd, err := node(v.Unchecked(), n); err != nil || nd == nil {
					if err == nil {
						// The refusal is confirmed on the node it names.
						err = r.Of("node", n)
					}
					if err == nil {
						err = cairn.Errorf(cairn.CodeNotFound, "node %s is not in the cluster", n).About(cairn.ObjNode)
					}
					return r.Decide(decide.Decision{}), err
				}
			}
			return r.Decide(decide.Decision{}.With(names.Event("pool", c.Name), &c, nil)), nil
		}},
		poolVerb("pool.import", func(r *decide.Reads, p *projections.Pool, c PoolImport) (*events.PoolImportGranted, []string, error) {
			// Reads the owner when the grant would move away from it: a grant that moves
			// because the owner was offline conflicts with the owner coming back
			// (node.set-state). The target is not a read to check: nothing keeps a node
			// from being removed while it holds a grant (the next import replaces it).
			// A refusal is confirmed on the target too.
			target, err := node(r.View().Unchecked(), c.Node)
			if err != nil {
				return nil, nil, err
			}
			var owner *projections.Node
			if p != nil && p.Owner != "" {
				if p.Owner != c.Node {
					if err := r.Of("node", p.Owner); err != nil {
						return nil, nil, err
					}
				}
				// Unchecked when the owner is the target: the grant does not move.
				if owner, err = node(r.View().Unchecked(), p.Owner); err != nil {
					return nil, nil, err
				}
			}
			ev, warnings, err := DecidePoolImport(p, target, owner, c, cfg.Now(), cfg.FailoverTimeout)
			if err != nil {
				if rerr := r.Of("node", c.Node); rerr != nil {
					return nil, nil, rerr
				}
			}
			return ev, warnings, err
		}),
		poolVerb("pool.export", func(_ *decide.Reads, p *projections.Pool, c PoolExport) (*events.PoolExported, []string, error) {
			return DecidePoolExport(p, c)
		}),
		poolVerb("pool.contest", func(_ *decide.Reads, p *projections.Pool, c PoolContest) (*events.PoolContested, []string, error) {
			return DecidePoolContest(p, c)
		}),
	}
}

// poolBody is a pool verb's body: it names its pool.
type poolBody interface{ poolName() string }

func (c PoolImport) poolName() string  { return c.Pool }
func (c PoolContest) poolName() string { return c.Pool }

// poolVerb is a handler for a verb on an existing pool's subject: it decodes C, reads
// the pool (nil when unknown) and lets fn choose the event E, recording what else
// it reads in r; the boundary is the pool's subject and those reads.
func poolVerb[C poolBody, E events.Payload](verb string, fn func(*decide.Reads, *projections.Pool, C) (E, []string, error)) decide.Handler {
	return decide.Handler{Verb: verb, Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
		var c C
		if err := decide.DecodeBody(body, &c); err != nil {
			return decide.Decision{}, err
		}
		r := decide.NewReads(v, names)
		if err := r.Of("pool", c.poolName()); err != nil {
			return decide.Decision{}, err
		}
		p, ok, err := v.Pool(c.poolName())
		if err != nil {
			return r.Decide(decide.Decision{}), err
		}
		ev, warnings, err := fn(r, decide.Ptr(p, ok), c)
		return r.Decide(decide.Decision{}.With(names.Event("pool", c.poolName()), ev, warnings)), err
	}}
}
