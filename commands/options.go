package commands

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// DRBD options and properties of groups, definitions and the controller.

// decidePropertiesPatch patches the free-form properties of the object name (a kind, for
// messages): the keys set and removed that change something, or nil and a warning when
// nothing changes.
// Refuses invalid_argument for a key both set and removed (unset_properties[i]), a DRBD
// option among them, or more than 128.
func decidePropertiesPatch(name, kind string, current, set map[string]string, unset []string) (*events.PropertiesChanged, []string, error) {
	changed, removed, err := patchMap(current, set, unset, "unset_properties")
	if err != nil {
		return nil, nil, err
	}
	if err := freeProperties(current, changed, removed, "properties"); err != nil {
		return nil, nil, err
	}
	if len(changed) == 0 && len(removed) == 0 {
		return nil, []string{kind + " " + name + " already has these properties; nothing changed"}, nil
	}
	return &events.PropertiesChanged{Name: name, Set: changed, Unset: removed}, nil, nil
}

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
		changed, err := optionsPatch(g.DRBDOptions, c.DRBDOptions, c.Unset)
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

// optionsPatch reports whether setting set and unsetting unset changes current.
// Refuses invalid_argument (unset[i]) for an option both set and unset, or a name that
// is no option.
func optionsPatch(current, set drbd.Options, unset []string) (bool, error) {
	next, err := drbd.Resolve(current, set).Without(unset)
	if err != nil {
		return false, err
	}
	both := drbd.Resolve(set)
	for i, n := range unset {
		if without, _ := both.Without([]string{n}); !reflect.DeepEqual(without, both) {
			return false, cairn.InvalidField(fmt.Sprintf("unset[%d]", i), "%s is both set and unset", n)
		}
	}
	return !reflect.DeepEqual(next, drbd.Resolve(current)), nil
}

// DecideResourceModify patches a definition's options: fields in c.DRBDOptions are set,
// names in c.Unset inherit again, everything else keeps its value. Refuses
// invalid_argument for an unknown unset name or a field both set and unset; a patch
// that changes nothing is a no-op with a warning.
func DecideResourceModify(current drbd.Options, c ResourceModify) (*events.ResourceOptionsChanged, []string, error) {
	changed, err := optionsPatch(current, c.DRBDOptions, c.Unset)
	if err != nil {
		return nil, nil, err
	}
	if !changed {
		return nil, []string{fmt.Sprintf("resource %s already has these options; nothing changed", c.Name)}, nil
	}
	return &events.ResourceOptionsChanged{Name: c.Name, Set: c.DRBDOptions, Unset: c.Unset}, nil, nil
}

// controllerHandler decides controller.modify: the deployment's DRBD options (the
// broadest level of the inheritance: every node of every definition gets desired state
// again) and free-form properties, bounded by their one subject.
func controllerHandler() Handler {
	return Handler{Verb: "controller.modify", Decide: func(v *projections.View, names events.Names, body []byte) (Decision, error) {
		var c ControllerModify
		subject := names.Event("controller", "settings")
		d, err := decodeWithBoundary(body, &c, func() (events.Expect, error) { return subjectBoundary(v, subject) })
		if err != nil {
			return d, err
		}
		var warnings []string
		if !reflect.DeepEqual(c.DRBDOptions, drbd.Options{}) || len(c.Unset) > 0 {
			current, err := v.ControllerOptions()
			if err != nil {
				return d, err
			}
			changed, err := optionsPatch(current.Options, c.DRBDOptions, c.Unset)
			if err != nil {
				return d, err
			}
			if changed {
				d = d.with(subject, &events.ControllerOptionsChanged{Set: c.DRBDOptions, Unset: c.Unset}, nil)
			} else {
				warnings = append(warnings, "the controller already has these options; nothing changed")
			}
		}
		if len(c.Properties) > 0 || len(c.UnsetProperties) > 0 {
			current, err := v.ControllerProperties()
			if err != nil {
				return d, err
			}
			ev, w, err := decidePropertiesPatch("controller", "the", current, c.Properties, c.UnsetProperties)
			if err != nil {
				return d, err
			}
			d, warnings = d.with(subject, (*events.ControllerPropertiesChanged)(ev), nil), append(warnings, w...)
		}
		if len(d.Events) > 0 {
			warnings = nil
		}
		return d.with(subject, (*events.ControllerPropertiesChanged)(nil), warnings), nil
	}}
}
