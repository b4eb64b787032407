// Package spagent is the node agent's storage-pool reporter: for every storage pool the
// control plane gives its node (desired state on <prefix>.node.<node>.sp.<name>) it
// makes the back end on the pool's devices when it has some (volume.Prepare: never
// over a device carrying a signature), measures the back end's capacity (volume.Measure: statfs, vgs/lvs, zfs list) and
// publishes it on <prefix>.status.<node>.sp.<name>, at once when the pool is given and
// then every Interval. The serve that leads records changes as sp.capacity-reported
// events, on which autoplace ranks and refuses (docs/pools.md... docs/resources.md).
package spagent

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/agents/volume"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/storage/backing"
	"github.com/rs/zerolog"
)

// Kind is the desired-state kind of storage pools.
const Kind = "sp"

// Publisher sends one message (a *nats.Conn in production).
type Publisher interface {
	Publish(subject string, data []byte) error
}

// Config configures a Reporter. Zero values take the defaults in parentheses.
type Config struct {
	Node  string
	Names events.Names
	// Root prefixes the file pools' directories, as the DRBD reconciler's.
	Root string
	Exec execx.Executor
	Pub  Publisher
	Log  zerolog.Logger
	// Interval is how often every pool is measured again (30 s).
	Interval time.Duration
}

// Reporter measures and reports the node's storage pools. Reconcile takes the pools the
// control plane gives the node; Run reports them every Interval.
type Reporter struct {
	cfg   Config
	mu    sync.Mutex
	pools map[string]backing.PoolSpec
}

// New returns a Reporter.
func New(cfg Config) *Reporter {
	if cfg.Interval <= 0 {
		cfg.Interval = 30 * time.Second
	}
	if cfg.Names.Prefix == "" {
		cfg.Names = events.NewNames("")
	}
	return &Reporter{cfg: cfg, pools: map[string]backing.PoolSpec{}}
}

// Reconcile takes one storage pool's desired state: a pool is measured and reported at
// once; an empty message forgets it (no more reports). Returns an error for a message
// that is not a pool of this node (nothing changes).
func (r *Reporter) Reconcile(ctx context.Context, subject string, data []byte) error {
	node, kind, name, ok := r.cfg.Names.ParseNode(subject)
	if !ok || kind != Kind || node != r.cfg.Node {
		return fmt.Errorf("spagent: %s is not a storage pool of node %s", subject, r.cfg.Node)
	}
	if len(data) == 0 {
		r.mu.Lock()
		delete(r.pools, name)
		r.mu.Unlock()
		return nil
	}
	var spec backing.PoolSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("storage pool %s: %w", name, err)
	}
	if spec.Name != name || spec.Node != r.cfg.Node {
		return fmt.Errorf("desired state on %s names pool %q on node %q", subject, spec.Name, spec.Node)
	}
	r.mu.Lock()
	r.pools[name] = spec
	r.mu.Unlock()
	r.report(ctx, spec)
	return nil
}

// Run reports every pool, and the host's unused block devices (reportDevices), every
// Interval until ctx ends; the devices also once at its start.
func (r *Reporter) Run(ctx context.Context) {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	r.reportDevices(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.reportDevices(ctx)
		r.mu.Lock()
		specs := slices.Collect(maps.Values(r.pools))
		r.mu.Unlock()
		for _, spec := range specs {
			r.report(ctx, spec)
		}
	}
}

// report measures one pool and publishes the report (with the error when the back end
// could not be measured).
func (r *Reporter) report(ctx context.Context, spec backing.PoolSpec) {
	rep := backing.PoolReport{Node: spec.Node, Name: spec.Name, At: time.Now().UTC()}
	var err error
	if len(spec.Devices) > 0 { // make the back end on the pool's devices first (once: Prepare is idempotent)
		var made bool
		made, err = volume.Prepare(ctx, spec.Provider, spec.Pool, spec.Devices, r.cfg.Exec)
		if err != nil {
			err = fmt.Errorf("make storage pool %s on %v: %w", spec.Name, spec.Devices, err)
		} else if made {
			r.cfg.Log.Info().Str("storage_pool", spec.Name).Str("pool", spec.Pool).Strs("devices", spec.Devices).Msg("storage pool made on its devices")
		}
	}
	var c backing.Capacity
	if err == nil {
		c, err = volume.Measure(ctx, spec.Provider, spec.Pool, r.cfg.Root, r.cfg.Exec)
	}
	if err != nil {
		rep.Error = err.Error()
		r.cfg.Log.Warn().Err(err).Str("storage_pool", spec.Name).Msg("storage pool not measured")
	} else {
		rep.Capacity = c
		if prov, err := volume.For(spec.Provider, spec.Pool, r.cfg.Root, r.cfg.Exec); err == nil {
			if f, ok := prov.(*volume.File); ok {
				if can, err := volume.CanReflink(f.Dir); err == nil {
					rep.Reflink = &can
				} else {
					r.cfg.Log.Warn().Err(err).Str("storage_pool", spec.Name).Msg("reflinks not probed")
				}
			}
		}
	}
	body, _ := json.Marshal(rep)
	if r.cfg.Pub == nil {
		return
	}
	if err := r.cfg.Pub.Publish(r.cfg.Names.Status(spec.Node, Kind, spec.Name), body); err != nil {
		r.cfg.Log.Warn().Err(err).Str("storage_pool", spec.Name).Msg("storage pool report not sent")
	}
}
