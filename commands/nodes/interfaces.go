package nodes

import (
	"maps"
	"slices"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// DefaultInterface is the name of a node's one interface before it has named ones: its
// replication address (LINSTOR's "default").
const DefaultInterface = "default"

// InterfacesOf is a node's named interfaces: its recorded ones, or DefaultInterface at
// its replication address when it has none.
func InterfacesOf(spec projections.NodeSpec) map[string]string {
	if len(spec.Interfaces) > 0 {
		return maps.Clone(spec.Interfaces)
	}
	return map[string]string{DefaultInterface: spec.Address}
}

// ReplicationInterface names the interface a node's replication address comes from:
// the preferred one when it is at the address, else the first by name at the address
// ("" when none is, which the decisions never leave).
func ReplicationInterface(spec projections.NodeSpec) string {
	ifs := InterfacesOf(spec)
	if p := spec.PreferredInterface; p != "" && ifs[p] == spec.Address {
		return p
	}
	for _, name := range slices.Sorted(maps.Keys(ifs)) {
		if ifs[name] == spec.Address {
			return name
		}
	}
	return ""
}

// interfacesPatch is what node.modify changes of a node's interfaces and address.
type interfacesPatch struct {
	Set       map[string]string
	Unset     []string
	Preferred *string // nil: unchanged; "": none
	Address   string  // "": unchanged
}

// decideInterfaces patches a node's interfaces and finds its replication address after
// the patch. The address is the preferred interface's when the node has that interface
// (an explicit address must then be the same); otherwise an explicit address, which the
// interfaces that had the old address take too; otherwise the address stays, or follows
// the interface that had it to its new address. ev is nil when the interfaces and the
// preference stay as they were (and a node without named interfaces gets none from an
// address change alone).
//
// Refuses with invalid_argument for a name both set and removed (field
// unset_interfaces), a node left without interfaces, or an explicit address other than
// the preferred interface's (field address); not_found for removing an interface the
// node does not have; failed_precondition for removing every interface at the
// replication address while no preferred one replaces it.
func decideInterfaces(spec projections.NodeSpec, p interfacesPatch) (ev *events.NodeInterfacesChanged, address string, err error) {
	for _, name := range p.Unset {
		if _, ok := p.Set[name]; ok {
			return nil, "", cairn.InvalidField("unset_interfaces", "interface %s is both set and removed", name)
		}
	}
	before := InterfacesOf(spec)
	after := maps.Clone(before)
	for _, name := range p.Unset {
		if _, ok := after[name]; !ok {
			return nil, "", cairn.Errorf(cairn.CodeNotFound, "node %s has no network interface %s (it has %v)", spec.Name, name, slices.Sorted(maps.Keys(before))).About(cairn.ObjNode)
		}
		delete(after, name)
	}
	maps.Copy(after, p.Set)
	if len(after) == 0 {
		return nil, "", cairn.InvalidField("unset_interfaces", "node %s would be left without a network interface", spec.Name)
	}
	preferred := spec.PreferredInterface
	if p.Preferred != nil {
		preferred = *p.Preferred
	}
	carriers := func(ifs map[string]string) []string { // the interfaces at the address, by name
		var out []string
		for _, name := range slices.Sorted(maps.Keys(ifs)) {
			if ifs[name] == spec.Address {
				out = append(out, name)
			}
		}
		return out
	}
	address = spec.Address
	switch at, ok := after[preferred]; {
	case ok && preferred != "":
		if p.Address != "" && p.Address != at {
			return nil, "", cairn.InvalidField("address", "node %s prefers interface %s, whose address is %s, not %s", spec.Name, preferred, at, p.Address)
		}
		address = at
	case p.Address != "":
		for _, name := range carriers(before) {
			if _, set := p.Set[name]; !set && after[name] == spec.Address {
				after[name] = p.Address
			}
		}
		address = p.Address
	case len(carriers(after)) == 0:
		moved := ""
		for _, name := range carriers(before) {
			if _, ok := after[name]; ok && moved == "" {
				moved = name
			}
		}
		if moved == "" {
			return nil, "", cairn.Errorf(cairn.CodePreconditionFailed, "removing %v leaves no interface at node %s's replication address %s: prefer another interface (LINSTOR's PrefNic) or change the address first",
				p.Unset, spec.Name, spec.Address).About(cairn.ObjNode)
		}
		address = after[moved]
	}
	if len(spec.Interfaces) == 0 && len(p.Set) == 0 && len(p.Unset) == 0 && p.Preferred == nil {
		return nil, address, nil // an address change alone names no interfaces
	}
	if maps.Equal(after, spec.Interfaces) && preferred == spec.PreferredInterface {
		return nil, address, nil
	}
	return &events.NodeInterfacesChanged{Name: spec.Name, Interfaces: after, Preferred: preferred}, address, nil
}

// decideAddInterfaces checks node.add's interfaces: the address must be one of them,
// the preferred one's when it is among them. ev is nil without interfaces.
func decideAddInterfaces(c NodeAdd) (*events.NodeInterfacesChanged, error) {
	if len(c.Interfaces) == 0 {
		if c.PreferredInterface != "" {
			return &events.NodeInterfacesChanged{Name: c.Name, Interfaces: map[string]string{DefaultInterface: c.Address}, Preferred: c.PreferredInterface}, nil
		}
		return nil, nil
	}
	if at, ok := c.Interfaces[c.PreferredInterface]; ok && at != c.Address {
		return nil, cairn.InvalidField("address", "the preferred interface %s has address %s, not %s", c.PreferredInterface, at, c.Address)
	}
	if !slices.Contains(slices.Collect(maps.Values(c.Interfaces)), c.Address) {
		return nil, cairn.InvalidField("address", "address %s is none of the interfaces' addresses %v", c.Address, c.Interfaces)
	}
	return &events.NodeInterfacesChanged{Name: c.Name, Interfaces: maps.Clone(c.Interfaces), Preferred: c.PreferredInterface}, nil
}
