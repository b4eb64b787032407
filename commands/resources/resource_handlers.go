package resources

import (
	"errors"
	"reflect"
	"strings"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/commands/replicas"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// Handlers decide the storage-pool, group, definition and replica verbs.
// Definition and replica verbs allocate cluster-wide (ports) and per node (minors) and
// read nodes and pools, so their boundary is the whole stream; rg.create and sp.create
// depend only on their own subject.
func Handlers(cfg Config) []decide.Handler {
	if cfg.Ports == (replicas.Range{}) {
		cfg.Ports = replicas.DefaultPorts
	}
	if cfg.Minors == (replicas.Range{}) {
		cfg.Minors = replicas.DefaultMinors
	}
	if cfg.Busy == nil {
		cfg.Busy = func(string) bool { return false }
	}
	// onResource runs fn on a plan for an existing definition.
	onResource := func(verb string, cmd func() any, name func(any) string, fn func(*resourcePlan, any) error) decide.Handler {
		return decide.Handler{Verb: verb, Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			c := cmd()
			if err := decide.DecodeBody(body, c); err != nil {
				return decide.Decision{}, err
			}
			p, err := newResourcePlan(v, names, cfg)
			if err == nil {
				err = p.load(name(c))
			}
			if err == nil {
				err = fn(p, c)
			}
			return p.decision(), err
		}}
	}
	return []decide.Handler{controllerHandler(),
		{Verb: "sp.create", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c StoragePoolCreate
			if err := decide.DecodeBody(body, &c); err != nil {
				return decide.Decision{}, err
			}
			subject := names.Event("node", c.Node)
			exp, err := decide.SubjectBoundary(v, subject)
			d := decide.Decision{Expect: exp}
			if err != nil {
				return d, err
			}
			if _, ok, err := v.Node(c.Node); err != nil || !ok {
				if err == nil {
					err = cairn.Errorf(cairn.CodeNotFound, "node %s is not in the cluster", c.Node).About(cairn.ObjNode)
				}
				return d, err
			}
			if sp, ok, err := v.StoragePool(c.Node, c.Name); err != nil || ok {
				if err == nil {
					err = cairn.Errorf(cairn.CodeAlreadyExists, "node %s already has storage pool %s (%s on %s)", c.Node, c.Name, sp.Provider, sp.Pool).About(cairn.ObjStoragePool)
				}
				return d, err
			}
			if err := checkDevices(v, c); err != nil {
				return d, err
			}
			return d.With(subject, &c, nil), nil
		}},
		{Verb: "rg.create", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c ResourceGroupCreate
			if err := decide.DecodeBody(body, &c); err != nil {
				return decide.Decision{}, err
			}
			subject := names.Event("rg", c.Name)
			exp, err := decide.SubjectBoundary(v, subject)
			d := decide.Decision{Expect: exp}
			if err != nil {
				return d, err
			}
			if _, ok, err := v.ResourceGroup(c.Name); err != nil || ok {
				if err == nil {
					err = cairn.Errorf(cairn.CodeAlreadyExists, "resource group %s already exists", c.Name).About(cairn.ObjResourceGroup)
				}
				return d, err
			}
			if err := decide.FreeProperties(nil, c.Properties, nil, "properties"); err != nil {
				return d, err
			}
			d = d.With(subject, &c.ResourceGroupCreated, nil)
			if len(c.Properties) > 0 {
				d = d.With(subject, &events.GroupPropertiesChanged{Name: c.Name, Set: c.Properties}, nil)
			}
			return d, nil
		}},
		{Verb: "sp.modify", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			// The node's subject: placements on the node claim it (node.claimed).
			var c StoragePoolModify
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, names.Event("node", c.Node)) })
			if err != nil {
				return d, err
			}
			ev, warnings, err := decideStoragePoolModify(v, c)
			return d.With(names.Event("node", c.Node), ev, warnings), err
		}},
		{Verb: "sp.capacity-report", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			// The node's subject: placements on the node claim it (node.claimed).
			var c events.StoragePoolCapacityReported
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, names.Event("node", c.Node)) })
			if err != nil {
				return d, err
			}
			ev, warnings, err := decideCapacityReport(v, c)
			return d.With(names.Event("node", c.Node), ev, warnings), err
		}},
		{Verb: "sp.delete", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			// The node's subject: placements on the node claim it (node.claimed); a
			// refusal also reads the definitions it names.
			var c StoragePoolDelete
			if err := decide.DecodeBody(body, &c); err != nil {
				return decide.Decision{}, err
			}
			r := decide.NewReads(v, names)
			if err := r.Of("node", c.Node); err != nil {
				return decide.Decision{}, err
			}
			ev, err := decideStoragePoolDelete(r, c)
			return r.Decide(decide.Decision{}).With(names.Event("node", c.Node), ev, nil), err
		}},
		{Verb: "rg.delete", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			// The group and every definition: an rd.create joining the group must make
			// this decision again (and reads the group, so it makes its own again).
			var c decide.NameOnly
			if err := decide.DecodeBody(body, &c); err != nil {
				return decide.Decision{}, err
			}
			r := decide.NewReads(v, names)
			if err := errors.Join(r.Of("rg", c.Name), r.Aggregate("rd")); err != nil {
				return decide.Decision{}, err
			}
			d := r.Decide(decide.Decision{})
			if _, ok, err := v.ResourceGroup(c.Name); err != nil || !ok {
				if err == nil {
					err = cairn.Errorf(cairn.CodeNotFound, "resource group %s does not exist", c.Name).About(cairn.ObjResourceGroup)
				}
				return d, err
			}
			rds, err := v.GroupDefinitions(c.Name, 10)
			if err != nil {
				return d, err
			}
			if len(rds) > 0 {
				more := ""
				if len(rds) == 10 {
					more = ", …"
				}
				return d, cairn.Errorf(cairn.CodePreconditionFailed, "resource group %s has resource definitions (%s%s); delete them first",
					c.Name, strings.Join(rds, ", "), more).WithDetails(map[string]any{"resources": rds, "in_use": true})
			}
			return r.Decide(d.With(names.Event("rg", c.Name), &events.ResourceGroupDeleted{Name: c.Name}, nil)), nil
		}},
		{Verb: "rg.modify", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c ResourceGroupModify
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, names.Event("rg", c.Name)) })
			if err != nil {
				return d, err
			}
			subject := names.Event("rg", c.Name)
			g, ok, err := v.ResourceGroup(c.Name)
			if err != nil || !ok {
				if err == nil {
					err = cairn.Errorf(cairn.CodeNotFound, "resource group %s does not exist", c.Name).About(cairn.ObjResourceGroup)
				}
				return d, err
			}
			mod, warnings, err := DecideGroupModify(g, c)
			if err != nil {
				return d, err
			}
			d = d.With(subject, mod, nil)
			if len(c.Properties) > 0 || len(c.UnsetProperties) > 0 {
				ev, w, err := decide.DecidePropertiesPatch(c.Name, "resource group", g.Properties, c.Properties, c.UnsetProperties)
				if err != nil {
					return d, err
				}
				d, warnings = d.With(subject, (*events.GroupPropertiesChanged)(ev), nil), append(warnings, w...)
			}
			if len(d.Events) > 0 {
				warnings = nil
			}
			return d.With(subject, (*events.GroupPropertiesChanged)(nil), warnings), nil
		}},
		{Verb: "rd.create", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c ResourceDefinitionCreate
			if err := decide.DecodeBody(body, &c); err != nil {
				return decide.Decision{}, err
			}
			p, err := newResourcePlan(v, names, cfg)
			if err == nil {
				err = p.createDefinition(c.Name, c.ResourceGroup, c.DRBDOptions, c.Properties)
			}
			return p.decision(), err
		}},
		{Verb: "rd.restore", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c SnapshotRestore
			if err := decide.DecodeBody(body, &c); err != nil {
				return decide.Decision{}, err
			}
			p, err := newResourcePlan(v, names, cfg)
			if err == nil {
				err = p.restoreSnapshot(c)
			}
			return p.decision(), err
		}},
		{Verb: "rd.restore-volumes", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c SnapshotRestore
			if err := decide.DecodeBody(body, &c); err != nil {
				return decide.Decision{}, err
			}
			p, err := newResourcePlan(v, names, cfg)
			if err == nil {
				err = p.restoreVolumes(c)
			}
			return p.decision(), err
		}},
		{Verb: "rg.spawn", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c ResourceGroupSpawn
			if err := decide.DecodeBody(body, &c); err != nil {
				return decide.Decision{}, err
			}
			sizes, err := spawnSizes(c.SizeKiB)
			if err != nil {
				return decide.Decision{}, err
			}
			p, err := newResourcePlan(v, names, cfg)
			if err == nil {
				err = p.spawn(c, sizes)
			}
			return p.decision(), err
		}},
		{Verb: "rd.modify", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c ResourceModify
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, names.Event("rd", c.Name)) })
			if err != nil {
				return d, err
			}
			subject := names.Event("rd", c.Name)
			rd, ok, err := v.ResourceDefinition(c.Name)
			if err != nil {
				return d, err
			}
			if !ok {
				return d, cairn.Errorf(cairn.CodeNotFound, "resource definition %s does not exist", c.Name).About(cairn.ObjResourceDefinition)
			}
			var warnings []string
			if !reflect.DeepEqual(c.DRBDOptions, drbd.Options{}) || len(c.Unset) > 0 {
				ev, w, err := DecideResourceModify(rd.DRBDOptions, c)
				if err != nil {
					return d, err
				}
				d, warnings = d.With(subject, ev, nil), append(warnings, w...)
			}
			if len(c.Properties) > 0 || len(c.UnsetProperties) > 0 {
				ev, w, err := decide.DecidePropertiesPatch(c.Name, "resource definition", rd.Properties, c.Properties, c.UnsetProperties)
				if err != nil {
					return d, err
				}
				if ev != nil {
					d = d.With(subject, (*events.DefinitionPropertiesChanged)(ev), nil)
				}
				warnings = append(warnings, w...)
			}
			if len(d.Events) > 0 {
				warnings = nil // a no-op warning of one half is noise when the other half changed
			}
			return d.With(subject, (*events.ResourceOptionsChanged)(nil), warnings), nil
		}},
		{Verb: "vd.modify", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c VolumeDefinitionModify
			subject := func() string { return names.Event("rd", c.Resource) }
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, subject()) })
			if err != nil {
				return d, err
			}
			ev, warnings, err := decideVolumeModify(v, c)
			if err != nil || ev == nil {
				return d.With(subject(), (*events.VolumePropertiesChanged)(nil), warnings), err
			}
			return d.With(subject(), ev, nil), nil
		}},
		{Verb: "replica.modify", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c ReplicaModify
			subject := func() string { return names.Event("rd", c.Resource) }
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, subject()) })
			if err != nil {
				return d, err
			}
			ev, warnings, err := decideReplicaModify(v, c)
			if err != nil || ev == nil {
				return d.With(subject(), (*events.ReplicaModified)(nil), warnings), err
			}
			return d.With(subject(), ev, nil), nil
		}},
		{Verb: "vd.filesystem-made", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c VolumeFilesystemMade
			subject := func() string { return names.Event("rd", c.Resource) }
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, subject()) })
			if err != nil {
				return d, err
			}
			ev, warnings, err := decideFilesystemMade(v, c)
			if err != nil || ev == nil {
				return d.With(subject(), (*events.VolumeFilesystemMade)(nil), warnings), err
			}
			return d.With(subject(), ev, nil), nil
		}},
		onResource("rd.delete", func() any { return new(ResourceDefinitionDelete) },
			func(c any) string { return c.(*ResourceDefinitionDelete).Name },
			func(p *resourcePlan, _ any) error { return p.deleteDefinition() }),
		onResource("vd.create", func() any { return new(VolumeDefinitionCreate) },
			func(c any) string { return c.(*VolumeDefinitionCreate).Resource },
			func(p *resourcePlan, c any) error {
				vc := c.(*VolumeDefinitionCreate)
				volume := p.freeVolume()
				if vc.Volume != nil {
					volume = *vc.Volume
				}
				if err := p.createVolume(volume, vc.SizeKiB); err != nil || len(vc.Properties) == 0 {
					return err
				}
				return p.volumeProperties(volume, vc.Properties)
			}),
		onResource("rd.snapshot", func() any { return new(SnapshotRef) },
			func(c any) string { return c.(*SnapshotRef).Resource },
			func(p *resourcePlan, c any) error { return p.snapshot(c.(*SnapshotRef).Name) }),
		{Verb: "rd.snapshot-multi", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c SnapshotMulti
			if err := decide.DecodeBody(body, &c); err != nil {
				return decide.Decision{}, err
			}
			return decideSnapshotMulti(v, names, cfg, c)
		}},
		onResource("rd.rollback", func() any { return new(SnapshotRollback) },
			func(c any) string { return c.(*SnapshotRollback).Resource },
			func(p *resourcePlan, c any) error { return p.rollback(c.(*SnapshotRollback).Snapshot) }),
		onResource("rd.clone", func() any { return new(SnapshotClone) },
			func(c any) string { return c.(*SnapshotClone).Resource },
			func(p *resourcePlan, c any) error { return p.clone(c.(*SnapshotClone).Target) }),
		onResource("rd.snapshot-delete", func() any { return new(SnapshotRef) },
			func(c any) string { return c.(*SnapshotRef).Resource },
			func(p *resourcePlan, c any) error { return p.deleteSnapshot(c.(*SnapshotRef).Name) }),
		onResource("rd.snapshot-progress", func() any { return new(SnapshotProgress) },
			func(c any) string { return c.(*SnapshotProgress).Resource },
			func(p *resourcePlan, c any) error { return p.snapshotProgress(*c.(*SnapshotProgress)) }),
		onResource("vd.resize", func() any { return new(VolumeDefinitionResize) },
			func(c any) string { return c.(*VolumeDefinitionResize).Resource },
			func(p *resourcePlan, c any) error {
				vc := c.(*VolumeDefinitionResize)
				return p.resizeVolume(vc.Volume, vc.SizeKiB)
			}),
		onResource("vd.delete", func() any { return new(VolumeDefinitionDelete) },
			func(c any) string { return c.(*VolumeDefinitionDelete).Resource },
			func(p *resourcePlan, c any) error { return p.deleteVolume(c.(*VolumeDefinitionDelete).Volume) }),
		onResource("replica.add", func() any { return new(ReplicaAdd) },
			func(c any) string { return c.(*ReplicaAdd).Resource },
			func(p *resourcePlan, c any) error { return p.replicaAdd(*c.(*ReplicaAdd)) }),
		onResource("replica.remove", func() any { return new(ReplicaRef) },
			func(c any) string { return c.(*ReplicaRef).Resource },
			func(p *resourcePlan, c any) error { return p.replicaRemove(*c.(*ReplicaRef)) }),
		onResource("replica.replace", func() any { return new(ReplicaReplace) },
			func(c any) string { return c.(*ReplicaReplace).Resource },
			func(p *resourcePlan, c any) error { return p.replicaReplace(*c.(*ReplicaReplace)) }),
		onResource("replica.migrate", func() any { return new(ReplicaMigrate) },
			func(c any) string { return c.(*ReplicaMigrate).Resource },
			func(p *resourcePlan, c any) error { return p.replicaMigrate(*c.(*ReplicaMigrate)) }),
		onResource("replica.toggle-disk", func() any { return new(ReplicaToggleDisk) },
			func(c any) string { return c.(*ReplicaToggleDisk).Resource },
			func(p *resourcePlan, c any) error { return p.toggleDisk(*c.(*ReplicaToggleDisk)) }),
		onResource("resource.activate", func() any { return new(ResourceActivate) },
			func(c any) string { return c.(*ResourceActivate).Resource },
			func(p *resourcePlan, c any) error { return p.activate(*c.(*ResourceActivate), true) }),
		onResource("resource.deactivate", func() any { return new(ResourceActivate) },
			func(c any) string { return c.(*ResourceActivate).Resource },
			func(p *resourcePlan, c any) error { return p.activate(*c.(*ResourceActivate), false) }),
		onResource("backup.create", func() any { return new(BackupCreate) },
			func(c any) string { return c.(*BackupCreate).Resource },
			func(p *resourcePlan, c any) error { return p.createBackup(*c.(*BackupCreate)) }),
		onResource("backup.ship", func() any { return new(BackupShip) },
			func(c any) string { return c.(*BackupShip).Resource },
			func(p *resourcePlan, c any) error { return p.shipBackup(*c.(*BackupShip)) }),
		onResource("backup.ship-finish", func() any { return new(ShipFinish) },
			func(c any) string { return c.(*ShipFinish).Resource },
			func(p *resourcePlan, c any) error { return p.finishShip(*c.(*ShipFinish)) }),
		onResource("backup.finish", func() any { return new(BackupFinish) },
			func(c any) string { return c.(*BackupFinish).Resource },
			func(p *resourcePlan, c any) error { return p.finishBackup(*c.(*BackupFinish)) }),
		onResource("backup.abort", func() any { return new(BackupFinish) },
			func(c any) string { return c.(*BackupFinish).Resource },
			func(p *resourcePlan, c any) error {
				b := *c.(*BackupFinish)
				return p.finishBackup(BackupFinish{Resource: b.Resource, ID: b.ID, Error: "aborted (backup.abort)"})
			}),
		{Verb: "backup.restore", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c BackupRestore
			if err := decide.DecodeBody(body, &c); err != nil {
				return decide.Decision{}, err
			}
			p, err := newResourcePlan(v, names, cfg)
			if err == nil {
				err = p.restoreBackup(c)
			}
			return p.decision(), err
		}},
	}
}
