package linstor

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/backing"
)

// AutoSelectFilter is LINSTOR's placement filter (the fields Cairn reads; others are
// accepted and ignored where the docs say so).
type AutoSelectFilter struct {
	PlaceCount           flexInt  `json:"place_count,omitzero"`
	AdditionalPlaceCount flexInt  `json:"additional_place_count,omitzero"`
	StoragePool          string   `json:"storage_pool,omitempty"`
	StoragePoolList      []string `json:"storage_pool_list,omitempty"`
	ReplicasOnSame       []string `json:"replicas_on_same,omitempty"`
	ReplicasOnDifferent  []string `json:"replicas_on_different,omitempty"`
	ProviderList         []string `json:"provider_list,omitempty"`
	LayerStack           []string `json:"layer_stack,omitempty"`
	DisklessOnRemaining  bool     `json:"diskless_on_remaining,omitempty"`
	NodeNameList         []string `json:"node_name_list,omitempty"`
	// Read by autoplace only (a group keeps none of them).
	NotPlaceWithRsc         []string       `json:"not_place_with_rsc,omitempty"`
	NotPlaceWithRscRegex    string         `json:"not_place_with_rsc_regex,omitempty"`
	XReplicasOnDifferent    map[string]int `json:"x_replicas_on_different_map,omitempty"`
	StoragePoolDisklessList []string       `json:"storage_pool_diskless_list,omitempty"`
	DisklessType            string         `json:"diskless_type,omitempty"`
}

// ResourceGroup is LINSTOR's resource group.
type ResourceGroup struct {
	Name         string            `json:"name"`
	Description  string            `json:"description,omitempty"`
	Props        map[string]string `json:"props,omitempty"`
	SelectFilter AutoSelectFilter  `json:"select_filter,omitzero"`
}

// pool is the storage pool the filter names: storage_pool, else the first of
// storage_pool_list ("" for none).
func (f AutoSelectFilter) pool() string {
	if f.StoragePool == "" && len(f.StoragePoolList) > 0 {
		return f.StoragePoolList[0]
	}
	return f.StoragePool
}

// pools are the pools the filter names: storage_pool and storage_pool_list together.
func (f AutoSelectFilter) pools() []string {
	pools := slices.Clone(f.StoragePoolList)
	if f.StoragePool != "" && !slices.Contains(pools, f.StoragePool) {
		pools = append(pools, f.StoragePool)
	}
	return pools
}

// placement adds the filter's placement to a group command: place count, pool, provider
// (invalid_argument for one Cairn does not serve), the layer stack's check, and the
// replicas_on lists (a list present, even empty, replaces the group's).
func (f AutoSelectFilter) placement(cmd map[string]any) error {
	if err := f.refuseUnkept(); err != nil {
		return err
	}
	if f.PlaceCount.Set {
		cmd["place_count"] = f.PlaceCount.Value
	}
	if pool := f.pool(); pool != "" {
		cmd["storage_pool"] = pool
	}
	if len(f.ProviderList) > 0 {
		p, ok := providerOf(f.ProviderList[0])
		if !ok {
			return cairn.InvalidField("provider", "provider kind %q: Cairn serves LVM, LVM_THIN, ZFS, ZFS_THIN, FILE and FILE_THIN", f.ProviderList[0])
		}
		cmd["provider"] = p
	}
	if err := checkLayers(f.LayerStack); err != nil {
		return err
	}
	if f.ReplicasOnSame != nil {
		cmd["replicas_on_same"] = cairnKeys(f.ReplicasOnSame)
	}
	if f.ReplicasOnDifferent != nil {
		cmd["replicas_on_different"] = cairnKeys(f.ReplicasOnDifferent)
	}
	return nil
}

// refuseUnkept refuses, naming the field, what a group's filter asks that a Cairn group
// does not keep (one pool, one provider, replicas_on lists of bare keys): a group never
// drops a constraint silently. An autoplace takes them (autoplaceFilter).
func (f AutoSelectFilter) refuseUnkept() error {
	switch {
	case len(f.pools()) > 1:
		return cairn.InvalidField("storage_pool_list", "a resource group keeps one storage pool, not %v; autoplace takes several", f.pools())
	case len(f.ProviderList) > 1:
		return cairn.InvalidField("provider_list", "a resource group keeps one provider, not %v; autoplace takes several", f.ProviderList)
	case len(f.NodeNameList) > 0:
		return cairn.InvalidField("node_name_list", "a resource group keeps no node list; autoplace takes one, or set AutoplaceTarget=false on the nodes to leave out")
	case len(f.NotPlaceWithRsc) > 0 || f.NotPlaceWithRscRegex != "":
		return cairn.InvalidField("not_place_with_rsc", "a resource group keeps no resources to avoid; autoplace takes not_place_with_rsc")
	case len(f.XReplicasOnDifferent) > 0:
		return cairn.InvalidField("x_replicas_on_different_map", "a resource group keeps no per-value replica counts; autoplace takes them")
	}
	for _, k := range f.ReplicasOnDifferent {
		if strings.Contains(k, "=") {
			return cairn.InvalidField("replicas_on_different", "%s: name the property alone (replicas differ in its value)", k)
		}
	}
	return nil
}

// IsZero lets omitzero drop an empty filter.
func (f AutoSelectFilter) IsZero() bool {
	return !f.PlaceCount.Set && !f.AdditionalPlaceCount.Set && f.StoragePool == "" && len(f.StoragePoolList) == 0 &&
		len(f.ReplicasOnSame) == 0 && len(f.ReplicasOnDifferent) == 0 && len(f.ProviderList) == 0 &&
		len(f.LayerStack) == 0 && !f.DisklessOnRemaining && len(f.NodeNameList) == 0 && len(f.NotPlaceWithRsc) == 0 &&
		f.NotPlaceWithRscRegex == "" && len(f.XReplicasOnDifferent) == 0 && len(f.StoragePoolDisklessList) == 0
}

// autoplaceFilter is replica.add's filter for an autoplace's select_filter: the node,
// pool and provider lists, not_place_with_rsc, and replicas_on_same/different (added
// to the group's; a replicas_on_same entry may name a value, key=value: every disk on a
// node with that value) and x_replicas_on_different. not_place_with_rsc_regex and a
// replicas_on_different entry with a value are refused naming the field: Cairn cannot
// honour them, and never drops a constraint silently. storage_pool_diskless_list
// has no meaning (diskless replicas take no pool in Cairn). nil when the filter asks
// nothing.
func (f AutoSelectFilter) autoplaceFilter() (map[string]any, error) {
	if f.NotPlaceWithRscRegex != "" {
		return nil, cairn.InvalidField("not_place_with_rsc_regex", "Cairn does not place by a name pattern; name the resources in not_place_with_rsc")
	}
	for _, k := range f.ReplicasOnDifferent {
		if strings.Contains(k, "=") {
			return nil, cairn.InvalidField("replicas_on_different", "%s: name the property alone (replicas differ in its value)", k)
		}
	}
	out := map[string]any{}
	if len(f.NodeNameList) > 0 {
		out["nodes"] = f.NodeNameList
	}
	if pools := f.pools(); len(pools) > 1 {
		out["storage_pools"] = pools
	}
	if len(f.ProviderList) > 0 {
		var providers []backing.Provider
		for _, kind := range f.ProviderList {
			p, ok := providerOf(kind)
			if !ok {
				return nil, cairn.InvalidField("provider_list", "provider kind %q: Cairn serves LVM, LVM_THIN, ZFS, ZFS_THIN, FILE and FILE_THIN", kind)
			}
			if !slices.Contains(providers, p) {
				providers = append(providers, p)
			}
		}
		out["providers"] = providers
	}
	if len(f.NotPlaceWithRsc) > 0 {
		out["not_with"] = f.NotPlaceWithRsc
	}
	if len(f.ReplicasOnSame) > 0 {
		out["replicas_on_same"] = cairnKeys(f.ReplicasOnSame)
	}
	if len(f.ReplicasOnDifferent) > 0 {
		out["replicas_on_different"] = cairnKeys(f.ReplicasOnDifferent)
	}
	if len(f.XReplicasOnDifferent) > 0 {
		x := map[string]int{}
		for k, n := range f.XReplicasOnDifferent {
			x[cairnKeys([]string{k})[0]] = n
		}
		out["x_replicas_on_different"] = x
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func groupOf(g projections.ResourceGroup) ResourceGroup {
	f := AutoSelectFilter{PlaceCount: flexInt{g.PlaceCount, true}, StoragePool: g.StoragePool,
		ReplicasOnSame: auxKeys(g.ReplicasOnSame), ReplicasOnDifferent: auxKeys(g.ReplicasOnDifferent)}
	if g.StoragePool != "" {
		f.StoragePoolList = []string{g.StoragePool}
	}
	if g.Provider != "" {
		f.ProviderList = []string{providerKinds[g.Provider]}
	}
	return ResourceGroup{Name: g.Name, Props: propsOf(g.DRBDOptions, g.Properties), SelectFilter: f}
}

// Node properties Cairn knows under their own names; every other key of
// replicas_on_same/different is an operator property, Aux/<key> in LINSTOR.
var builtinNodeProps = map[string]bool{"node": true, "host": true, "failure_domain": true, "physical_label": true}

func auxKeys(keys []string) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if key, _, _ := strings.Cut(k, "="); !builtinNodeProps[key] {
			k = propAuxPrefix + k
		}
		out = append(out, k)
	}
	return out
}

// cairnKeys maps LINSTOR's replicas_on_same/different keys to Cairn's node properties:
// Aux/<key> is the operator's property <key>; the CLI's bare keys mean the same. A
// value (Aux/<key>=<value>) stays: <key>=<value>.
func cairnKeys(keys []string) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, strings.TrimPrefix(k, propAuxPrefix))
	}
	return out
}

func (a *API) listResourceGroups(w http.ResponseWriter, r *http.Request) {
	names := queryList(r.URL.Query(), "resource_groups")
	a.streamPage(w, r, objRscGrp, func(v *projections.View, emit func(any) (bool, error)) error {
		return v.EachResourceGroup(func(g projections.ResourceGroup) (bool, error) {
			if !matches(names, g.Name) {
				return true, nil
			}
			return emit(groupOf(g))
		})
	})
}

func (a *API) getResourceGroup(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("rg")
	a.withView(w, objRscGrp, func(v *projections.View) (any, error) {
		g, ok, err := v.ResourceGroup(name)
		if err != nil || !ok {
			return nil, orNotFound(err, cairn.ObjResourceGroup, "resource group %s does not exist", name)
		}
		return groupOf(g), nil
	})
}

// listVolumeGroups answers a group's volume groups: Cairn's groups have none (spawn
// names the volume sizes), so an existing group answers an empty list.
func (a *API) listVolumeGroups(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("rg")
	a.withView(w, objRscGrp, func(v *projections.View) (any, error) {
		if _, ok, err := v.ResourceGroup(name); err != nil || !ok {
			return nil, orNotFound(err, cairn.ObjResourceGroup, "resource group %s does not exist", name)
		}
		return []any{}, nil
	})
}

// createResourceGroup maps LINSTOR's resource group create to rg.create: place_count
// (default 2, as LINSTOR), the first storage pool of storage_pool or storage_pool_list,
// the first provider of provider_list, replicas_on_same/different, DrbdOptions/* props.
func (a *API) createResourceGroup(w http.ResponseWriter, r *http.Request) {
	var in ResourceGroup
	if !readBody(w, r, &in) {
		return
	}
	cmd := map[string]any{"name": in.Name, "place_count": 2}
	if err := in.SelectFilter.placement(cmd); err != nil {
		writeFailure(w, opCreate, objRscGrp, err)
		return
	}
	opts, free, err := optionsOf(in.Props)
	if err != nil {
		writeFailure(w, opCreate, objRscGrp, err)
		return
	}
	a.commit(w, r, "rg.create", withProperties(cmd, opts, free), opCreate, objRscGrp, fmt.Sprintf("New resource group '%s' created.", in.Name), map[string]string{"RscGrp": in.Name})
}

// modifyResourceGroup maps LINSTOR's group modify to rg.modify: select_filter's place
// count, pool, provider and replicas_on lists, DrbdOptions/* as options, other
// properties kept as given. Existing definitions keep their replicas (the next
// autoplace follows the new placement); their nodes get new options. A description
// change answers 501 and changes nothing.
func (a *API) modifyResourceGroup(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("rg")
	var in struct {
		Description   string            `json:"description"`
		OverrideProps map[string]string `json:"override_props"`
		DeleteProps   []string          `json:"delete_props"`
		SelectFilter  AutoSelectFilter  `json:"select_filter"`
	}
	if !readBody(w, r, &in) {
		return
	}
	if in.Description != "" {
		e := rc(maskError, opModify, objRscGrp, codeImplError, "Cairn keeps no description on resource groups")
		writeRCs(w, http.StatusNotImplemented, []ApiCallRc{e})
		return
	}
	opts, free, err := optionsOf(in.OverrideProps)
	if err != nil {
		writeFailure(w, opModify, objRscGrp, err)
		return
	}
	unsetOpts, unsetFree := unsetOf(in.DeleteProps)
	cmd := withProperties(map[string]any{"name": name}, opts, free)
	if len(unsetOpts) > 0 {
		cmd["unset"] = unsetOpts
	}
	if len(unsetFree) > 0 {
		cmd["unset_properties"] = unsetFree
	}
	if err := in.SelectFilter.placement(cmd); err != nil {
		writeFailure(w, opModify, objRscGrp, err)
		return
	}
	if len(cmd) == 1 {
		writeResults(w, []ApiCallRc{rc(maskWarn, opModify, objRscGrp, codeNoEffect, "nothing to change on resource group "+name)})
		return
	}
	a.commit(w, r, "rg.modify", cmd, opModify, objRscGrp, fmt.Sprintf("Resource group '%s' modified.", name), map[string]string{"RscGrp": name})
}

// deleteResourceGroup maps to rg.delete (refused, FAIL_IN_USE, while definitions
// belong to the group).
func (a *API) deleteResourceGroup(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("rg")
	a.commit(w, r, "rg.delete", map[string]any{"name": name}, opDelete, objRscGrp, fmt.Sprintf("Resource group '%s' deleted.", name), map[string]string{"RscGrp": name})
}

// checkLayers accepts the layer stacks Cairn builds: DRBD on storage (or storage alone
// named with it), in any case.
func checkLayers(stack []string) error {
	for i, l := range stack {
		switch strings.ToUpper(l) {
		case "DRBD", "STORAGE":
		default:
			return cairn.InvalidField("layer_stack", "layer %q (layer_stack[%d]): Cairn builds DRBD on STORAGE only", l, i)
		}
	}
	return nil
}

// spawnRequest is LINSTOR's ResourceGroupSpawn.
type spawnRequest struct {
	ResourceDefinitionName string            `json:"resource_definition_name"`
	VolumeSizes            []uint64          `json:"volume_sizes"`
	SelectFilter           AutoSelectFilter  `json:"select_filter"`
	Partial                bool              `json:"partial"`
	DefinitionsOnly        bool              `json:"definitions_only"`
	Props                  map[string]string `json:"resource_definition_props"`
}

// spawn maps LINSTOR's spawn to rg.spawn (definition, volumes and autoplace in one
// command, all or nothing); definitions_only or no volume sizes create the definition
// (and its volumes) without placing. A select_filter place count other than the
// group's places that many after the spawn.
func (a *API) spawn(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("rg")
	var in spawnRequest
	if !readBody(w, r, &in) {
		return
	}
	name := in.ResourceDefinitionName
	opts, free, err := optionsOf(in.Props)
	if err != nil {
		writeFailure(w, opCreate, objRscDfn, err)
		return
	}
	var out []ApiCallRc
	if in.DefinitionsOnly || len(in.VolumeSizes) == 0 {
		cmd := map[string]any{"name": name, "resource_group": group}
		reply, err := a.command(r, "rd.create", withProperties(cmd, opts, free))
		if err != nil {
			writeFailure(w, opCreate, objRscDfn, err)
			return
		}
		out = results(success(opCreate, objRscDfn, fmt.Sprintf("New resource definition '%s' created.", name), map[string]string{"RscDfn": name}), reply, opCreate, objRscDfn)
		for i, size := range in.VolumeSizes {
			reply, err := a.command(r, "vd.create", map[string]any{"resource": name, "volume": i, "size_kib": size})
			if err != nil {
				writeResults(w, append(out, fromError(opCreate, objVlmDfn, err)))
				return
			}
			out = append(out, results(success(opCreate, objVlmDfn, fmt.Sprintf("New volume definition of '%s' created.", name), map[string]string{"RscDfn": name}), reply, opCreate, objVlmDfn)...)
		}
		writeResults(w, out)
		return
	}
	cmd := map[string]any{"resource_group": group, "name": name, "size_kib": in.VolumeSizes}
	reply, err := a.command(r, "rg.spawn", withProperties(cmd, opts, free))
	if err != nil {
		writeFailure(w, opCreate, objRscDfn, err)
		return
	}
	out = results(success(opCreate, objRscDfn, fmt.Sprintf("Resource definition '%s' spawned and placed.", name), map[string]string{"RscDfn": name, "RscGrp": group}), reply, opCreate, objRscDfn)
	if f := in.SelectFilter; f.PlaceCount.Set {
		reply, err := a.command(r, "replica.add", map[string]any{"resource": name, "place_count": f.PlaceCount.Value})
		if err != nil {
			writeResults(w, append(out, fromError(opCreate, objRsc, err)))
			return
		}
		out = append(out, results(success(opCreate, objRsc, fmt.Sprintf("Resource '%s' placed.", name), map[string]string{"RscDfn": name}), reply, opCreate, objRsc)...)
	}
	writeResults(w, out)
}
