package linstor

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/projections"
)

// KeyValueStore is LINSTOR's key-value store instance.
type KeyValueStore struct {
	Name  string            `json:"name"`
	Props map[string]string `json:"props,omitempty"`
}

func (a *API) listKV(w http.ResponseWriter, r *http.Request) {
	a.streamPage(w, r, objKVS, func(v *projections.View, emit func(any) (bool, error)) error {
		return v.EachKVInstance(func(kv projections.KVInstance) (bool, error) {
			return emit(KeyValueStore{Name: kv.Name, Props: kv.Props})
		})
	})
}

// getKV answers one instance as a list (empty for an instance without keys, as
// LINSTOR answers an unknown one).
func (a *API) getKV(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("instance")
	a.withView(w, objKVS, func(v *projections.View) (any, error) {
		kv, ok, err := v.KV(name)
		switch {
		case err != nil:
			return nil, err
		case !ok: // as LINSTOR: golinstor's Get then returns NotFoundError, which clients handle
			return nil, cairn.Errorf(cairn.CodeNotFound, "key-value store %s does not exist", name)
		}
		return []KeyValueStore{{Name: name, Props: kv}}, nil
	})
}

// modifyKV maps override_props, delete_props and delete_namespaces (every key under
// "<namespace>/") to kv.modify.
func (a *API) modifyKV(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("instance")
	var in propsModify
	if !readBody(w, r, &in) {
		return
	}
	unset := append([]string(nil), in.DeleteProps...)
	if len(in.DeleteNamespaces) > 0 {
		var kv map[string]string
		err := a.read(func(v *projections.View) (err error) {
			kv, _, err = v.KV(name)
			return err
		})
		if err != nil {
			writeFailure(w, opModify, objKVS, err)
			return
		}
		for k := range kv {
			for _, ns := range in.DeleteNamespaces {
				if strings.HasPrefix(k, strings.TrimSuffix(ns, "/")+"/") {
					unset = append(unset, k)
				}
			}
		}
	}
	cmd := map[string]any{"instance": name}
	if len(in.OverrideProps) > 0 {
		cmd["set"] = in.OverrideProps
	}
	if len(unset) > 0 {
		cmd["unset"] = dedupe(unset)
	}
	if len(in.OverrideProps) == 0 && len(unset) == 0 {
		writeResults(w, []ApiCallRc{rc(maskWarn, opModify, objKVS, codeNoEffect, "nothing to change in key-value store "+name)})
		return
	}
	a.commit(w, r, "kv.modify", cmd, opModify, objKVS, fmt.Sprintf("Key-value store '%s' modified.", name), map[string]string{"KeyValueStore": name})
}

func (a *API) deleteKV(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("instance")
	reply, err := a.command(r, "kv.delete", map[string]any{"instance": name})
	if cairn.ErrorCode(err) == cairn.CodeNotFound {
		writeResults(w, []ApiCallRc{rc(maskWarn, opDelete, objKVS, codeWarnNotFound, "Key-value store '"+name+"' not found.")})
		return
	}
	if err != nil {
		writeFailure(w, opDelete, objKVS, err)
		return
	}
	writeResults(w, results(success(opDelete, objKVS, fmt.Sprintf("Key-value store '%s' deleted.", name), map[string]string{"KeyValueStore": name}), reply, opDelete, objKVS))
}

func dedupe(keys []string) []string {
	seen := map[string]bool{}
	out := keys[:0]
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// controllerProperties serves the deployment's free-form properties.
func (a *API) controllerProperties(w http.ResponseWriter, r *http.Request) {
	a.withView(w, objCtrlConf, func(v *projections.View) (any, error) {
		props, err := v.ControllerProperties()
		if err != nil {
			return nil, err
		}
		opts, err := v.ControllerOptions()
		out := propsOf(opts.Options, props)
		if out == nil {
			out = map[string]string{}
		}
		return out, err
	})
}

// modifyControllerProperties maps to controller.modify: DrbdOptions/* are the
// deployment's DRBD options (every node of every definition gets them, below group,
// definition and replica), other properties are kept as given. A namespace delete
// answers 501. Success answers 201, as the OpenAPI document declares.
func (a *API) modifyControllerProperties(w http.ResponseWriter, r *http.Request) {
	var in propsModify
	if !readBody(w, r, &in) {
		return
	}
	opts, free, err := optionsOf(in.OverrideProps)
	if err != nil {
		writeFailure(w, opModify, objCtrlConf, err)
		return
	}
	if len(in.DeleteNamespaces) > 0 {
		e := rc(maskError, opModify, objCtrlConf, codeImplError, "Cairn does not delete controller property namespaces; name the properties")
		writeRCs(w, http.StatusNotImplemented, []ApiCallRc{e})
		return
	}
	unsetOpts, unsetFree := unsetOf(in.DeleteProps)
	cmd := withProperties(map[string]any{}, opts, free)
	if len(unsetOpts) > 0 {
		cmd["unset"] = unsetOpts
	}
	if len(unsetFree) > 0 {
		cmd["unset_properties"] = unsetFree
	}
	if len(cmd) == 0 {
		writeRCs(w, http.StatusCreated, []ApiCallRc{rc(maskWarn, opModify, objCtrlConf, codeNoEffect, "nothing to change")})
		return
	}
	reply, err := a.command(r, "controller.modify", cmd)
	if err != nil {
		writeFailure(w, opModify, objCtrlConf, err)
		return
	}
	writeRCs(w, http.StatusCreated, results(success(opModify, objCtrlConf, "Controller properties modified.", nil), reply, opModify, objCtrlConf))
}
