package linstor

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/projections"
)

// ResourceDefinition is LINSTOR's resource definition.
type ResourceDefinition struct {
	Name              string             `json:"name"`
	Props             map[string]string  `json:"props,omitempty"`
	Flags             []string           `json:"flags,omitempty"`
	LayerData         []LayerData        `json:"layer_data,omitempty"`
	ResourceGroupName string             `json:"resource_group_name,omitempty"`
	VolumeDefinitions []VolumeDefinition `json:"volume_definitions,omitempty"`
}

// LayerData is one layer of a definition; DRBD's carries the port.
type LayerData struct {
	Type string         `json:"type"`
	Data map[string]any `json:"data,omitempty"`
}

// VolumeDefinition is LINSTOR's volume definition.
type VolumeDefinition struct {
	VolumeNumber *int              `json:"volume_number,omitempty"`
	SizeKiB      uint64            `json:"size_kib"`
	Props        map[string]string `json:"props,omitempty"`
	Flags        []string          `json:"flags,omitempty"`
	LayerData    []LayerData       `json:"layer_data,omitempty"`
}

func definitionOf(rd projections.ResourceDefinition, withVolumes bool) ResourceDefinition {
	group := rd.ResourceGroup
	if group == "" {
		group = "DfltRscGrp"
	}
	out := ResourceDefinition{Name: rd.Name, Props: propsOf(rd.DRBDOptions, rd.Properties), ResourceGroupName: group,
		LayerData: []LayerData{{Type: "DRBD", Data: map[string]any{"port": rd.Port, "peer_slots": 7, "al_stripes": 1, "al_stripe_size_kib": 32}}, {Type: "STORAGE"}}}
	if withVolumes {
		for _, vd := range rd.Volumes {
			out.VolumeDefinitions = append(out.VolumeDefinitions, volumeDefinitionOf(vd))
		}
	}
	return out
}

func volumeDefinitionOf(vd projections.VolumeDefinition) VolumeDefinition {
	nr := vd.Volume
	return VolumeDefinition{VolumeNumber: &nr, SizeKiB: vd.SizeKiB, Props: vd.Properties,
		LayerData: []LayerData{{Type: "DRBD"}, {Type: "STORAGE"}}}
}

// truthy reads LINSTOR's boolean query parameters (the Python client sends True/False).
func truthy(s string) bool {
	b, _ := strconv.ParseBool(s)
	return b
}

func (a *API) listDefinitions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	names := queryList(q, "resource_definitions")
	withVolumes := truthy(q.Get("with_volume_definitions"))
	// Streamed: 100,000 definitions are never all in memory.
	a.streamPage(w, r, objRscDfn, func(v *projections.View, emit func(any) (bool, error)) error {
		return v.EachResourceDefinition(func(rd projections.ResourceDefinition) (bool, error) {
			if !matches(names, rd.Name) {
				return true, nil
			}
			return emit(definitionOf(rd, withVolumes))
		})
	})
}

// definition reads one definition or answers not_found about it.
func definition(v *projections.View, name string) (projections.ResourceDefinition, error) {
	rd, ok, err := v.ResourceDefinition(name)
	if err != nil || !ok {
		return rd, orNotFound(err, cairn.ObjResourceDefinition, "resource definition %s does not exist", name)
	}
	return rd, nil
}

func (a *API) getDefinition(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("rd")
	a.withView(w, objRscDfn, func(v *projections.View) (any, error) {
		rd, err := definition(v, name)
		return definitionOf(rd, true), err
	})
}

// createDefinition maps LINSTOR's definition create to rd.create (group, DrbdOptions/*
// props). drbd_port is refused: Cairn allocates ports.
func (a *API) createDefinition(w http.ResponseWriter, r *http.Request) {
	var in struct {
		DrbdPort           int                `json:"drbd_port"`
		ResourceDefinition ResourceDefinition `json:"resource_definition"`
	}
	if !readBody(w, r, &in) {
		return
	}
	if in.DrbdPort != 0 {
		writeFailure(w, opCreate, objRscDfn, cairn.InvalidField("drbd_port", "Cairn allocates DRBD ports; leave drbd_port out"))
		return
	}
	rd := in.ResourceDefinition
	cmd := map[string]any{"name": rd.Name}
	if rd.ResourceGroupName != "" && rd.ResourceGroupName != "DfltRscGrp" {
		cmd["resource_group"] = rd.ResourceGroupName
	}
	opts, free, err := optionsOf(rd.Props)
	if err != nil {
		writeFailure(w, opCreate, objRscDfn, err)
		return
	}
	a.commit(w, r, "rd.create", withProperties(cmd, opts, free), opCreate, objRscDfn, fmt.Sprintf("New resource definition '%s' created.", rd.Name), map[string]string{"RscDfn": rd.Name})
}

// modifyDefinition maps override_props/delete_props of DrbdOptions/* to rd.modify.
func (a *API) modifyDefinition(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("rd")
	var in struct {
		OverrideProps map[string]string `json:"override_props"`
		DeleteProps   []string          `json:"delete_props"`
		ResourceGroup string            `json:"resource_group"`
		DrbdPort      int               `json:"drbd_port"`
	}
	if !readBody(w, r, &in) {
		return
	}
	if in.ResourceGroup != "" || in.DrbdPort != 0 {
		writeFailure(w, opModify, objRscDfn, cairn.InvalidField("resource_group", "Cairn does not move a definition to another group or port here (port: resource.activate with reallocate_port)"))
		return
	}
	cmd, err := modifyCommand(map[string]any{"name": name}, in.OverrideProps, in.DeleteProps)
	if err != nil {
		writeFailure(w, opModify, objRscDfn, err)
		return
	}
	a.commit(w, r, "rd.modify", cmd, opModify, objRscDfn, fmt.Sprintf("Resource definition '%s' modified.", name), map[string]string{"RscDfn": name})
}

// modifyCommand completes rd.modify or replica.modify (cmd names the object) from
// LINSTOR's property changes: DrbdOptions/* as options, the rest as free-form properties.
func modifyCommand(cmd map[string]any, override map[string]string, remove []string) (map[string]any, error) {
	opts, free, err := optionsOf(override)
	if err != nil {
		return nil, err
	}
	unset, unsetFree := unsetOf(remove)
	cmd = withProperties(cmd, opts, free)
	if len(unset) > 0 {
		cmd["unset"] = unset
	}
	if len(unsetFree) > 0 {
		cmd["unset_properties"] = unsetFree
	}
	return cmd, nil
}

// deleteDefinition maps to rd.delete, which takes the definition's resources with it
// in the same atomic append (as LINSTOR does); in use (Primary somewhere) it is refused.
func (a *API) deleteDefinition(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("rd")
	a.commit(w, r, "rd.delete", map[string]any{"name": name}, opDelete, objRscDfn, fmt.Sprintf("Resource definition '%s' deleted.", name), map[string]string{"RscDfn": name})
}

func (a *API) listVolumeDefinitions(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("rd")
	a.withView(w, objVlmDfn, func(v *projections.View) (any, error) {
		rd, err := definition(v, name)
		out := make([]VolumeDefinition, 0, len(rd.Volumes))
		for _, vd := range rd.Volumes {
			out = append(out, volumeDefinitionOf(vd))
		}
		return out, err
	})
}

func (a *API) getVolumeDefinition(w http.ResponseWriter, r *http.Request) {
	name, nr := r.PathValue("rd"), r.PathValue("nr")
	a.withView(w, objVlmDfn, func(v *projections.View) (any, error) {
		rd, err := definition(v, name)
		if err != nil {
			return nil, err
		}
		for _, vd := range rd.Volumes {
			if strconv.Itoa(vd.Volume) == nr {
				return volumeDefinitionOf(vd), nil
			}
		}
		return nil, notFound(cairn.ObjVolumeDefinition, "resource definition %s has no volume %s", name, nr)
	})
}

// createVolumeDefinition maps LINSTOR's volume definition create to vd.create; without a
// volume number it takes the next one after the definition's highest.
func (a *API) createVolumeDefinition(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("rd")
	var in struct {
		VolumeDefinition VolumeDefinition `json:"volume_definition"`
	}
	if !readBody(w, r, &in) {
		return
	}
	nr := 0
	if in.VolumeDefinition.VolumeNumber != nil {
		nr = *in.VolumeDefinition.VolumeNumber
	} else {
		rd, err := a.definitionNow(name)
		if err != nil {
			writeFailure(w, opCreate, objVlmDfn, err)
			return
		}
		for _, vd := range rd.Volumes {
			nr = max(nr, vd.Volume+1)
		}
	}
	if len(in.VolumeDefinition.Flags) > 0 {
		e := rc(maskError, opCreate, objVlmDfn, codeImplError, "Cairn keeps no flags on volume definitions (GROSS_SIZE, ...)")
		writeRCs(w, http.StatusNotImplemented, []ApiCallRc{e})
		return
	}
	cmd := map[string]any{"resource": name, "volume": nr, "size_kib": in.VolumeDefinition.SizeKiB}
	if len(in.VolumeDefinition.Props) > 0 {
		cmd["properties"] = in.VolumeDefinition.Props
	}
	a.commit(w, r, "vd.create", cmd, opCreate, objVlmDfn, fmt.Sprintf("New volume definition with number '%d' of resource definition '%s' created.", nr, name), map[string]string{"RscDfn": name, "VlmNr": strconv.Itoa(nr)})
}

// modifyVolumeDefinition maps LINSTOR's volume definition modify: override_props,
// delete_props and delete_namespaces (what `linstor volume-definition set-property`
// sends; the namespaces expanded to the keys the volume has) to vd.modify, then
// size_kib (`linstor volume-definition set-size`) to vd.resize: grow only. Flags Cairn
// does not keep: 501, nothing changed.
func (a *API) modifyVolumeDefinition(w http.ResponseWriter, r *http.Request) {
	name, nr := r.PathValue("rd"), r.PathValue("nr")
	n, ok := volumeNumber(w, nr, opModify)
	if !ok {
		return
	}
	var in struct {
		propsModify
		SizeKiB *uint64  `json:"size_kib"`
		Flags   []string `json:"flags"`
	}
	if !readBody(w, r, &in) {
		return
	}
	if len(in.Flags) > 0 {
		e := rc(maskError, opModify, objVlmDfn, codeImplError, "Cairn keeps no flags on volume definitions (GROSS_SIZE, ...); it changes their size and properties")
		writeRCs(w, http.StatusNotImplemented, []ApiCallRc{e})
		return
	}
	if in.SizeKiB == nil && len(in.OverrideProps)+len(in.DeleteProps)+len(in.DeleteNamespaces) == 0 {
		writeFailure(w, opModify, objVlmDfn, cairn.InvalidField("size_kib", "nothing to change: give size_kib, override_props, delete_props or delete_namespaces"))
		return
	}
	msg := fmt.Sprintf("Volume definition with number '%d' of resource definition '%s' modified.", n, name)
	refs := map[string]string{"RscDfn": name, "VlmNr": nr}
	var propsReply *admission.Reply
	if len(in.OverrideProps)+len(in.DeleteProps)+len(in.DeleteNamespaces) > 0 {
		unset := slices.Clone(in.DeleteProps)
		if len(in.DeleteNamespaces) > 0 { // every key under each namespace the volume has now
			rd, err := a.definitionNow(name)
			if err != nil {
				writeFailure(w, opModify, objVlmDfn, err)
				return
			}
			var current map[string]string
			for _, vd := range rd.Volumes {
				if vd.Volume == n {
					current = vd.Properties
				}
			}
			for _, ns := range in.DeleteNamespaces {
				for k := range current {
					if strings.HasPrefix(k, strings.TrimSuffix(ns, "/")+"/") && !slices.Contains(unset, k) {
						unset = append(unset, k)
					}
				}
			}
		}
		cmd := map[string]any{"resource": name, "volume": n}
		if len(in.OverrideProps) > 0 {
			cmd["properties"] = in.OverrideProps
		}
		if len(unset) > 0 {
			cmd["unset_properties"] = unset
		}
		if _, ok := cmd["properties"]; ok || len(unset) > 0 {
			reply, err := a.command(r, "vd.modify", cmd)
			if err != nil {
				writeFailure(w, opModify, objVlmDfn, err)
				return
			}
			propsReply = &reply
		}
	}
	if in.SizeKiB != nil {
		a.commit(w, r, "vd.resize", map[string]any{"resource": name, "volume": n, "size_kib": *in.SizeKiB}, opModify, objVlmDfn, msg, refs)
		return
	}
	if propsReply == nil { // only namespaces that hold nothing: nothing to change
		writeResults(w, []ApiCallRc{success(opModify, objVlmDfn, msg, refs)})
		return
	}
	writeResults(w, results(success(opModify, objVlmDfn, msg, refs), *propsReply, opModify, objVlmDfn))
}

// volumeNumber parses a volume number of a path; a bad one is answered (invalid
// argument naming volume) and ok is false.
func volumeNumber(w http.ResponseWriter, nr string, op uint64) (int, bool) {
	n, err := strconv.Atoi(nr)
	if err != nil {
		writeFailure(w, op, objVlmDfn, cairn.InvalidField("volume", "volume number %q is not a number", nr))
		return 0, false
	}
	return n, true
}

// deleteVolumeDefinition maps to vd.delete: a volume of a definition without replicas
// (FAIL_IN_USE for a deployed one).
func (a *API) deleteVolumeDefinition(w http.ResponseWriter, r *http.Request) {
	name, nr := r.PathValue("rd"), r.PathValue("nr")
	n, ok := volumeNumber(w, nr, opDelete)
	if !ok {
		return
	}
	a.commit(w, r, "vd.delete", map[string]any{"resource": name, "volume": n}, opDelete, objVlmDfn,
		fmt.Sprintf("Volume definition %d of resource definition '%s' deleted.", n, name), map[string]string{"RscDfn": name, "VlmNr": nr})
}
