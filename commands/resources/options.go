package resources

import (
	"fmt"
	"github.com/cairn-io/cairn"
	"reflect"
	"slices"

	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// DRBD options and properties of groups, definitions and the controller.

// DecideGroupModify patches a group's placement (place count, pool, provider, the
// replicas_on lists) and DRBD options; what it does not name keeps its value. Existing
// definitions keep their replicas (the next autoplace uses the new placement), and their
// nodes get the new options. Refuses invalid_argument for an option both set and unset
// or an unknown unset name; nothing changed is nil and a warning (none when the patch
// named no placement or option at all).
func DecideGroupModify(g projections.ResourceGroup, c ResourceGroupModify) (*events.ResourceGroupModified, []string, error) {
	ev := &events.ResourceGroupModified{Name: c.Name}
	named := false
	if c.PlaceCount != 0 {
		named = true
		if c.PlaceCount != g.PlaceCount {
			ev.PlaceCount = c.PlaceCount
		}
	}
	if c.StoragePool != nil {
		named = true
		if *c.StoragePool != g.StoragePool {
			ev.StoragePool = c.StoragePool
		}
	}
	if c.Provider != nil {
		named = true
		if *c.Provider != g.Provider {
			ev.Provider = c.Provider
		}
	}
	if c.ReplicasOnSame != nil {
		named = true
		if !slices.Equal(*c.ReplicasOnSame, g.ReplicasOnSame) {
			ev.ReplicasOnSame = c.ReplicasOnSame
		}
	}
	if c.ReplicasOnDifferent != nil {
		named = true
		if !slices.Equal(*c.ReplicasOnDifferent, g.ReplicasOnDifferent) {
			ev.ReplicasOnDifferent = c.ReplicasOnDifferent
		}
	}
	if !reflect.DeepEqual(c.DRBDOptions, drbd.Options{}) || len(c.Unset) > 0 {
		named = true
		changed, err := decide.OptionsPatch(g.DRBDOptions, c.DRBDOptions, c.Unset)
		if err != nil {
			return nil, nil, err
		}
		if changed {
			ev.Set, ev.Unset = c.DRBDOptions, c.Unset
		}
	}
	if reflect.DeepEqual(*ev, events.ResourceGroupModified{Name: c.Name}) {
		if !named {
			return nil, nil, nil
		}
		return nil, []string{fmt.Sprintf("resource group %s already has this placement and these options; nothing changed", c.Name)}, nil
	}
	return ev, nil, nil
}

// DecideResourceModify patches a definition's options: fields in c.DRBDOptions are set,
// names in c.Unset inherit again, everything else keeps its value. Refuses
// invalid_argument for an unknown unset name or a field both set and unset; a patch
// that changes nothing is a no-op with a warning.
func DecideResourceModify(current drbd.Options, c ResourceModify) (*events.ResourceOptionsChanged, []string, error) {
	changed, err := decide.OptionsPatch(current, c.DRBDOptions, c.Unset)
	if err != nil {
		return nil, nil, err
	}
	if !changed {
		return nil, []string{fmt.Sprintf("resource %s already has these options; nothing changed", c.Name)}, nil
	}
	return &events.ResourceOptionsChanged{Name: c.Name, Set: c.DRBDOptions, Unset: c.Unset}, nil, nil
}

// decideVolumeModify patches the free-form properties of volume c.Volume of definition
// c.Resource. Refuses not_found for a definition or volume that does not exist, and
// what DecidePropertiesPatch refuses; a patch that changes nothing is a no-op (nil) with
// a warning.
func decideVolumeModify(v *projections.View, c VolumeDefinitionModify) (*events.VolumePropertiesChanged, []string, error) {
	rd, ok, err := v.ResourceDefinition(c.Resource)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, cairn.Errorf(cairn.CodeNotFound, "resource definition %s does not exist", c.Resource).About(cairn.ObjResourceDefinition)
	}
	for _, vol := range rd.Volumes {
		if vol.Volume != c.Volume {
			continue
		}
		p, warnings, err := decide.DecidePropertiesPatch(fmt.Sprintf("%s/%d", c.Resource, c.Volume), "volume definition", vol.Properties, c.Properties, c.UnsetProperties)
		if err != nil || p == nil {
			return nil, warnings, err
		}
		return &events.VolumePropertiesChanged{Resource: c.Resource, Volume: c.Volume, Set: p.Set, Unset: p.Unset}, nil, nil
	}
	return nil, nil, cairn.Errorf(cairn.CodeNotFound, "resource definition %s has no volume %d", c.Resource, c.Volume).About(cairn.ObjVolumeDefinition)
}

// controllerHandler decides controller.modify: the deployment's DRBD options (the
// broadest level of the inheritance: every node of every definition gets desired state
// again) and free-form properties, bounded by their one subject.
func controllerHandler() decide.Handler {
	return decide.Handler{Verb: "controller.modify", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
		var c ControllerModify
		subject := names.Event("controller", "settings")
		d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, subject) })
		if err != nil {
			return d, err
		}
		var warnings []string
		if !reflect.DeepEqual(c.DRBDOptions, drbd.Options{}) || len(c.Unset) > 0 {
			current, err := v.ControllerOptions()
			if err != nil {
				return d, err
			}
			changed, err := decide.OptionsPatch(current.Options, c.DRBDOptions, c.Unset)
			if err != nil {
				return d, err
			}
			if changed {
				d = d.With(subject, &events.ControllerOptionsChanged{Set: c.DRBDOptions, Unset: c.Unset}, nil)
			} else {
				warnings = append(warnings, "the controller already has these options; nothing changed")
			}
		}
		if len(c.Properties) > 0 || len(c.UnsetProperties) > 0 {
			current, err := v.ControllerProperties()
			if err != nil {
				return d, err
			}
			ev, w, err := decide.DecidePropertiesPatch("controller", "the", current, c.Properties, c.UnsetProperties)
			if err != nil {
				return d, err
			}
			d, warnings = d.With(subject, (*events.ControllerPropertiesChanged)(ev), nil), append(warnings, w...)
		}
		if len(d.Events) > 0 {
			warnings = nil
		}
		return d.With(subject, (*events.ControllerPropertiesChanged)(nil), warnings), nil
	}}
}

// decideFilesystemMade records that c.Node made the filesystem of volume c.Volume
// (the node's report, sent by the lease holder). Refuses not_found for a definition,
// volume or diskful replica on the node that does not exist; a volume whose filesystem
// is already recorded is a no-op with a warning (a report folded twice, two serves).
func decideFilesystemMade(v *projections.View, c VolumeFilesystemMade) (*events.VolumeFilesystemMade, []string, error) {
	rd, ok, err := v.ResourceDefinition(c.Resource)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, cairn.Errorf(cairn.CodeNotFound, "resource definition %s does not exist", c.Resource).About(cairn.ObjResourceDefinition)
	}
	if r, ok := rd.Replica(c.Node); !ok || r.Diskless {
		return nil, nil, cairn.Errorf(cairn.CodeNotFound, "resource %s has no disk on node %s", c.Resource, c.Node).About(cairn.ObjResource)
	}
	for _, vol := range rd.Volumes {
		if vol.Volume != c.Volume {
			continue
		}
		if vol.Filesystem != nil {
			return nil, []string{fmt.Sprintf("the filesystem of %s/%d is recorded already (%s, made on %s)", c.Resource, c.Volume, vol.Filesystem.Type, vol.Filesystem.Node)}, nil
		}
		return &events.VolumeFilesystemMade{Resource: c.Resource, Volume: c.Volume, Node: c.Node, Type: c.Type}, nil, nil
	}
	return nil, nil, cairn.Errorf(cairn.CodeNotFound, "resource definition %s has no volume %d", c.Resource, c.Volume).About(cairn.ObjVolumeDefinition)
}

// decideReplicaModify patches one replica's DRBD options (they apply on its node only,
// over every broader level) and free-form properties. Refuses not_found for a
// definition or replica that does not exist, invalid_argument as rd.modify does; a
// patch that changes nothing is a no-op with a warning.
func decideReplicaModify(v *projections.View, c ReplicaModify) (*events.ReplicaModified, []string, error) {
	rd, ok, err := v.ResourceDefinition(c.Resource)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, cairn.Errorf(cairn.CodeNotFound, "resource definition %s does not exist", c.Resource).About(cairn.ObjResourceDefinition)
	}
	r, ok := rd.Replica(c.Node)
	if !ok {
		return nil, nil, cairn.Errorf(cairn.CodeNotFound, "resource %s has no replica on node %s", c.Resource, c.Node).About(cairn.ObjResource)
	}
	ev := &events.ReplicaModified{Resource: c.Resource, Node: c.Node}
	if !reflect.DeepEqual(c.DRBDOptions, drbd.Options{}) || len(c.Unset) > 0 {
		changed, err := decide.OptionsPatch(r.DRBDOptions, c.DRBDOptions, c.Unset)
		if err != nil {
			return nil, nil, err
		}
		if changed {
			ev.Set, ev.Unset = c.DRBDOptions, c.Unset
		}
	}
	if len(c.Properties) > 0 || len(c.UnsetProperties) > 0 {
		p, _, err := decide.DecidePropertiesPatch(c.Resource+" on "+c.Node, "resource", r.Properties, c.Properties, c.UnsetProperties)
		if err != nil {
			return nil, nil, err
		}
		if p != nil {
			ev.SetProperties, ev.UnsetProperties = p.Set, p.Unset
		}
	}
	if reflect.DeepEqual(*ev, events.ReplicaModified{Resource: c.Resource, Node: c.Node}) {
		return nil, []string{fmt.Sprintf("resource %s on node %s already has these options and properties; nothing changed", c.Resource, c.Node)}, nil
	}
	return ev, nil, nil
}
