package linstor

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/commands/nodes"
	"github.com/cairn-io/cairn/commands/replicas"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// Node is LINSTOR's node.
type Node struct {
	Name             string            `json:"name"`
	Type             string            `json:"type"`
	Flags            []string          `json:"flags,omitempty"`
	Props            map[string]string `json:"props,omitempty"`
	NetInterfaces    []NetInterface    `json:"net_interfaces,omitempty"`
	ConnectionStatus string            `json:"connection_status,omitempty"`
	StorageProviders []string          `json:"storage_providers,omitempty"`
	ResourceLayers   []string          `json:"resource_layers,omitempty"`
}

// NetInterface is LINSTOR's network interface of a node.
type NetInterface struct {
	Name                    string `json:"name"`
	Address                 string `json:"address"`
	SatellitePort           int    `json:"satellite_port,omitempty"`
	SatelliteEncryptionType string `json:"satellite_encryption_type,omitempty"`
	IsActive                bool   `json:"is_active,omitempty"`
}

// Node properties with a meaning in Cairn. Aux/<key> are the operator's node
// properties (what replicas_on_same/different refer to).
const (
	propAuxPrefix     = "Aux/"
	propFailureDomain = "Cairn/FailureDomain"
	propPhysicalLabel = "Cairn/PhysicalLabel"
	propHost          = "Cairn/Host"
	propRole          = "Cairn/Role"
	propPrefNic       = "PrefNic" // the interface DRBD uses: Cairn's preferred interface
)

// nodeOf renders a Cairn node as LINSTOR's: online nodes are ONLINE, others OFFLINE;
// Cairn's spec travels in Cairn/* properties, the operator's properties as Aux/*.
func nodeOf(n projections.Node) Node {
	netifs := netInterfacesOf(n.Spec)
	props := map[string]string{propHost: n.Spec.Host, propRole: n.Spec.Role}
	for _, ni := range netifs {
		if ni.IsActive {
			props["CurStltConnName"] = ni.Name
		}
	}
	if n.Spec.PreferredInterface != "" {
		props[propPrefNic] = n.Spec.PreferredInterface
	}
	if n.Spec.FailureDomain != "" {
		props[propFailureDomain] = n.Spec.FailureDomain
	}
	if n.Spec.PhysicalLabel != "" {
		props[propPhysicalLabel] = n.Spec.PhysicalLabel
	}
	for k, v := range n.Spec.Properties {
		if linstorNodeKey(k) {
			props[k] = v
		} else {
			props[propAuxPrefix+k] = v
		}
	}
	status := "OFFLINE"
	if n.Status.State == "online" {
		status = "ONLINE"
	}
	var flags []string
	switch n.Spec.Maintenance {
	case events.MaintenanceEvacuating:
		flags = append(flags, "EVACUATE")
	case events.MaintenanceEvicted:
		flags = append(flags, "EVICTED")
	}
	return Node{Name: n.Spec.Name, Type: "Satellite", Props: props, ConnectionStatus: status, Flags: flags,
		NetInterfaces:    netifs,
		StorageProviders: []string{"DISKLESS", "LVM", "LVM_THIN", "ZFS", "ZFS_THIN", "FILE", "FILE_THIN"},
		ResourceLayers:   []string{"DRBD", "STORAGE"}}
}

// netInterfacesOf is a node's network interfaces by name; the active one is the one
// its replication address comes from (nodes.ReplicationInterface).
func netInterfacesOf(spec projections.NodeSpec) []NetInterface {
	ifs, active := nodes.InterfacesOf(spec), nodes.ReplicationInterface(spec)
	out := make([]NetInterface, 0, len(ifs))
	for _, name := range slices.Sorted(maps.Keys(ifs)) {
		out = append(out, NetInterface{Name: name, Address: ifs[name], SatellitePort: 3366, SatelliteEncryptionType: "PLAIN", IsActive: name == active})
	}
	return out
}

// propFilter parses ?props=K=V filters (a node passes when it has every one).
func propFilter(values []string) map[string]string {
	out := map[string]string{}
	for _, v := range values {
		k, val, _ := strings.Cut(v, "=")
		out[k] = val
	}
	return out
}

func (a *API) listNodes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	names, props := queryList(q, "nodes"), propFilter(q["props"])
	a.streamPage(w, r, objNode, func(v *projections.View, emit func(any) (bool, error)) error {
		return v.EachNode("", func(n projections.Node) (bool, error) {
			if !matches(names, n.Spec.Name) {
				return true, nil
			}
			ln := nodeOf(n)
			for k, val := range props {
				if got, ok := ln.Props[k]; !ok || val != "" && got != val {
					return true, nil
				}
			}
			return emit(ln)
		})
	})
}

func (a *API) getNode(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("node")
	a.withView(w, objNode, func(v *projections.View) (any, error) {
		n, ok, err := v.Node(name)
		if err == nil && !ok {
			err = notFound(cairn.ObjNode, "node %s is not in the cluster", name)
		}
		return nodeOf(n), err
	})
}

// createNode maps LINSTOR's node create to node.add: its network interfaces, the
// replication address from the one PrefNic names, else "default", else the first; the
// host from Cairn/Host (default: the name), the failure domain and physical label from
// Cairn/FailureDomain and Cairn/PhysicalLabel, Aux/<key> to the node's properties.
// Satellite and Combined nodes are storage nodes.
func (a *API) createNode(w http.ResponseWriter, r *http.Request) {
	var in Node
	if !readBody(w, r, &in) {
		return
	}
	cmd := map[string]any{"name": in.Name, "host": in.Name}
	ifs := map[string]string{}
	for _, ni := range in.NetInterfaces {
		ifs[ni.Name] = ni.Address
	}
	if len(in.NetInterfaces) > 0 {
		cmd["address"] = in.NetInterfaces[0].Address
		cmd["interfaces"] = ifs
	}
	if at, ok := ifs[nodes.DefaultInterface]; ok {
		cmd["address"] = at
	}
	if pref := in.Props[propPrefNic]; pref != "" {
		cmd["preferred_interface"] = pref
		if at, ok := ifs[pref]; ok {
			cmd["address"] = at
		}
	}
	switch strings.ToLower(in.Type) {
	case "", "satellite", "combined":
	default:
		writeFailure(w, opCreate, objNode, cairn.InvalidField("role", "node type %q: Cairn runs satellite (storage) nodes only", in.Type))
		return
	}
	aux := map[string]string{}
	for k, v := range in.Props {
		switch {
		case k == propHost:
			cmd["host"] = v
		case k == propFailureDomain:
			cmd["failure_domain"] = v
		case k == propPhysicalLabel:
			cmd["physical_label"] = v
		case k == propPrefNic:
		case strings.HasPrefix(k, propAuxPrefix):
			aux[strings.TrimPrefix(k, propAuxPrefix)] = v
		default:
			writeFailure(w, opCreate, objNode, cairn.InvalidField("properties", "node property %s has no meaning in Cairn (use Aux/<key>, %s, %s, %s or %s)", k, propHost, propFailureDomain, propPhysicalLabel, propPrefNic))
			return
		}
	}
	if len(aux) > 0 {
		cmd["properties"] = aux
	}
	a.commit(w, r, "node.add", cmd, opCreate, objNode, fmt.Sprintf("New node '%s' registered.", in.Name), map[string]string{"Node": in.Name})
}

// modifyNode maps LINSTOR's node modify to node.modify: Aux/<key> properties set and
// removed. Cairn's own (Cairn/*) are settled at node.add; other keys are refused.
func (a *API) modifyNode(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("node")
	var in struct {
		NodeType      string            `json:"node_type"`
		OverrideProps map[string]string `json:"override_props"`
		DeleteProps   []string          `json:"delete_props"`
	}
	if !readBody(w, r, &in) {
		return
	}
	if in.NodeType != "" && !strings.EqualFold(in.NodeType, "satellite") {
		writeFailure(w, opModify, objNode, cairn.InvalidField("role", "node type %q: Cairn runs satellite (storage) nodes only", in.NodeType))
		return
	}
	set := map[string]string{}
	var unset []string
	cmd := map[string]any{"name": name}
	if pref, ok := in.OverrideProps[propPrefNic]; ok {
		cmd["preferred_interface"] = pref
		delete(in.OverrideProps, propPrefNic)
	}
	if i := slices.Index(in.DeleteProps, propPrefNic); i >= 0 {
		cmd["preferred_interface"] = ""
		in.DeleteProps = slices.Delete(in.DeleteProps, i, i+1)
	}
	for _, k := range sortedKeys(in.OverrideProps) {
		key, err := auxKey(k)
		if err != nil {
			writeFailure(w, opModify, objNode, err)
			return
		}
		set[key] = in.OverrideProps[k]
	}
	for _, k := range in.DeleteProps {
		key, err := auxKey(k)
		if err != nil {
			writeFailure(w, opModify, objNode, err)
			return
		}
		unset = append(unset, key)
	}
	if len(set) > 0 {
		cmd["properties"] = set
	}
	if len(unset) > 0 {
		cmd["unset"] = unset
	}
	if len(cmd) == 1 {
		e := rc(maskWarn, opModify, objNode, codeNoEffect, "nothing to change on node "+name)
		writeResults(w, []ApiCallRc{e})
		return
	}
	a.commit(w, r, "node.modify", cmd, opModify, objNode, fmt.Sprintf("Node '%s' modified.", name), map[string]string{"Node": name})
}

// linstorNodeKey reports whether k is one of LINSTOR's own node properties that Cairn
// keeps under its name (AutoplaceTarget, the DrbdOptions/AutoEvict… settings): the
// policies read them there.
func linstorNodeKey(k string) bool {
	return k == replicas.PropAutoplaceTarget || decide.LINSTORLevelOptions[k]
}

// auxKey is the Cairn node property of a LINSTOR Aux/<key> property, or of one of
// LINSTOR's own that Cairn keeps (linstorNodeKey).
func auxKey(k string) (string, error) {
	if key, ok := strings.CutPrefix(k, propAuxPrefix); ok && key != "" {
		return key, nil
	}
	if linstorNodeKey(k) {
		return k, nil
	}
	if strings.HasPrefix(k, "Cairn/") {
		return "", cairn.InvalidField("properties", "node property %s is set at node creation and stays", k)
	}
	return "", cairn.InvalidField("properties", "node property %s has no meaning in Cairn (node properties are Aux/<key>)", k)
}

func (a *API) deleteNode(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("node")
	a.commit(w, r, "node.remove", map[string]any{"name": name}, opDelete, objNode, fmt.Sprintf("Node '%s' deleted.", name), map[string]string{"Node": name})
}

// lostNode maps LINSTOR's node lost to node.lost: the node leaves the cluster with every
// replica it held in one command, all or nothing (a refused removal removes no replica).
// The answer has one entry per resource removed, then the node's, as LINSTOR's.
func (a *API) lostNode(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("node")
	var rds []string
	if err := a.read(func(v *projections.View) (err error) {
		rds, err = v.NodeResources(name)
		return err
	}); err != nil {
		writeFailure(w, opDelete, objNode, err)
		return
	}
	reply, err := a.command(r, "node.lost", map[string]any{"name": name})
	if err != nil {
		writeFailure(w, opDelete, objNode, err)
		return
	}
	var out []ApiCallRc
	for _, rd := range rds {
		out = append(out, success(opDelete, objRsc, fmt.Sprintf("Resource '%s' on the lost node deleted.", rd), map[string]string{"RscDfn": rd, "Node": name}))
	}
	writeResults(w, append(out, results(success(opDelete, objNode, fmt.Sprintf("Node '%s' deleted.", name), map[string]string{"Node": name}), reply, opDelete, objNode)...))
}

// evacuateNode maps LINSTOR's node evacuate to node.evacuate: the node gets no new
// replicas and the evacuation policy moves every replica off it (a replacement first,
// the old one once the replacement is UpToDate). Target lists are not supported: a
// node is kept out of placement with AutoplaceTarget=false.
func (a *API) evacuateNode(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("node")
	var in struct {
		Target      []string `json:"target"`
		DoNotTarget []string `json:"do_not_target"`
	}
	if !readBody(w, r, &in) {
		return
	}
	if len(in.Target) > 0 || len(in.DoNotTarget) > 0 {
		writeFailure(w, opModify, objNode, cairn.InvalidField("target", "evacuation target lists are not supported; set AutoplaceTarget=false on the nodes to leave out"))
		return
	}
	a.commit(w, r, "node.evacuate", map[string]any{"name": name}, opModify, objNode,
		fmt.Sprintf("Node '%s' is being evacuated: each replica moves once its replacement is UpToDate (GET /cairn/v1/policies shows the progress).", name),
		map[string]string{"Node": name})
}

// restoreNode maps LINSTOR's node restore to node.restore: an evacuation is cancelled
// (replacements already placed stay) or an evicted node is a placement target again.
// An evicted node's replicas were moved off it already, so delete_resources and
// delete_snapshots have nothing left to do.
func (a *API) restoreNode(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("node")
	var in struct {
		DeleteResources bool `json:"delete_resources"`
		DeleteSnapshots bool `json:"delete_snapshots"`
	}
	if !readBody(w, r, &in) {
		return
	}
	a.commit(w, r, "node.restore", map[string]any{"name": name}, opModify, objNode,
		fmt.Sprintf("Node '%s' restored: it is a placement target again.", name), map[string]string{"Node": name})
}

// listNetInterfaces serves a node's network interfaces (netInterfacesOf).
func (a *API) listNetInterfaces(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("node")
	a.withView(w, objNode, func(v *projections.View) (any, error) {
		n, ok, err := v.Node(name)
		if err != nil || !ok {
			return nil, orNotFound(err, cairn.ObjNode, "node %s is not in the cluster", name)
		}
		return netInterfacesOf(n.Spec), nil
	})
}

func (a *API) getNetInterface(w http.ResponseWriter, r *http.Request) {
	name, netif := r.PathValue("node"), r.PathValue("netif")
	a.withView(w, objNetIf, func(v *projections.View) (any, error) {
		ni, err := netInterfaceOf(v, name, netif)
		return ni, err
	})
}

// netInterfaceOf is one interface of a node: not_found (FAIL_NOT_FOUND_NODE or
// FAIL_NOT_FOUND_NET_IF) without it.
func netInterfaceOf(v *projections.View, node, netif string) (*NetInterface, error) {
	n, ok, err := v.Node(node)
	if err != nil || !ok {
		return nil, orNotFound(err, cairn.ObjNode, "node %s is not in the cluster", node)
	}
	for _, ni := range netInterfacesOf(n.Spec) {
		if ni.Name == netif {
			return &ni, nil
		}
	}
	return nil, cairn.Errorf(cairn.CodeNotFound, "node %s has no network interface %s", node, netif)
}

// createNetInterface maps LINSTOR's net-interface create to node.modify setting it
// (is_active: true also makes it the preferred interface, the one replication uses). A
// name the node has answers FAIL_EXISTS_NET_IF and changes nothing.
func (a *API) createNetInterface(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("node")
	var in NetInterface
	if !readBody(w, r, &in) {
		return
	}
	var exists bool
	if err := a.read(func(v *projections.View) error {
		ni, err := netInterfaceOf(v, name, in.Name)
		exists = ni != nil
		if cairn.ErrorCode(err) == cairn.CodeNotFound && cairn.AsError(err).Object == "" {
			err = nil // the node exists, the interface does not
		}
		return err
	}); err != nil {
		writeFailure(w, opCreate, objNetIf, err)
		return
	}
	if exists {
		writeRCs(w, http.StatusInternalServerError, []ApiCallRc{rc(maskError, opCreate, objNetIf, codeExistsNetIf,
			fmt.Sprintf("Network interface '%s' of node '%s' already exists.", in.Name, name))})
		return
	}
	cmd := map[string]any{"name": name, "interfaces": map[string]string{in.Name: in.Address}}
	if in.IsActive {
		cmd["preferred_interface"] = in.Name
	}
	a.commit(w, r, "node.modify", cmd, opCreate, objNetIf, fmt.Sprintf("New network interface '%s' on node '%s' registered.", in.Name, name), map[string]string{"Node": name, "NetIf": in.Name})
}

// modifyNetInterface maps LINSTOR's net-interface modify to node.modify: a new address
// (replication follows it when the interface carries it), is_active: true makes it the
// preferred interface.
func (a *API) modifyNetInterface(w http.ResponseWriter, r *http.Request) {
	name, netif := r.PathValue("node"), r.PathValue("netif")
	var in NetInterface
	if !readBody(w, r, &in) {
		return
	}
	if err := a.read(func(v *projections.View) error {
		_, err := netInterfaceOf(v, name, netif)
		return err
	}); err != nil {
		writeFailure(w, opModify, objNetIf, err)
		return
	}
	cmd := map[string]any{"name": name}
	if in.Address != "" {
		cmd["interfaces"] = map[string]string{netif: in.Address}
	}
	if in.IsActive {
		cmd["preferred_interface"] = netif
	}
	if len(cmd) == 1 {
		writeResults(w, []ApiCallRc{rc(maskWarn, opModify, objNetIf, codeNoEffect, "nothing to change on network interface "+netif+" of node "+name)})
		return
	}
	a.commit(w, r, "node.modify", cmd, opModify, objNetIf, fmt.Sprintf("Network interface '%s' on node '%s' modified.", netif, name), map[string]string{"Node": name, "NetIf": netif})
}

// deleteNetInterface maps LINSTOR's net-interface delete to node.modify removing it;
// the interface replication uses cannot go while no other has its address (prefer
// another first).
func (a *API) deleteNetInterface(w http.ResponseWriter, r *http.Request) {
	name, netif := r.PathValue("node"), r.PathValue("netif")
	if err := a.read(func(v *projections.View) error {
		_, err := netInterfaceOf(v, name, netif)
		return err
	}); err != nil {
		writeFailure(w, opDelete, objNetIf, err)
		return
	}
	a.commit(w, r, "node.modify", map[string]any{"name": name, "unset_interfaces": []string{netif}}, opDelete, objNetIf,
		fmt.Sprintf("Network interface '%s' of node '%s' deleted.", netif, name), map[string]string{"Node": name, "NetIf": netif})
}
