// Package kv decides the key-value store verbs (kv.modify, kv.delete): LINSTOR's
// key-value store, one instance per subject.
package kv

import (
	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// KVModify is the body of kv.modify.
type KVModify struct {
	Instance string            `json:"instance"`
	Set      map[string]string `json:"set,omitempty"`
	Unset    []string          `json:"unset,omitempty"`
}

// KVDelete is the body of kv.delete.
type KVDelete struct {
	Instance string `json:"instance"`
}

// DecideKVModify sets and removes keys of an instance (created by its first key).
// Refuses with invalid_argument (field unset[i]) for a key both set and removed; what
// changes nothing is a no-op with a warning.
func DecideKVModify(current map[string]string, c KVModify) (*events.KVModified, []string, error) {
	set, unset, err := decide.PatchMap(current, c.Set, c.Unset, "unset")
	if err != nil {
		return nil, nil, err
	}
	ev := &events.KVModified{Instance: c.Instance, Set: set, Unset: unset}
	if len(ev.Set) == 0 && len(ev.Unset) == 0 {
		return nil, []string{"key-value store " + c.Instance + " already holds this; nothing changed"}, nil
	}
	return ev, nil, nil
}

// DecideKVDelete removes an instance; one that does not exist is not_found.
func DecideKVDelete(exists bool, c KVDelete) (*events.KVDeleted, error) {
	if !exists {
		return nil, cairn.Errorf(cairn.CodeNotFound, "key-value store %s does not exist", c.Instance)
	}
	return &events.KVDeleted{Instance: c.Instance}, nil
}

// Handlers decide the key-value store verbs, each bounded by its instance's subject.
func Handlers() []decide.Handler {
	return []decide.Handler{
		{Verb: "kv.modify", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c KVModify
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, names.Event("kv", c.Instance)) })
			if err != nil {
				return d, err
			}
			current, _, err := v.KV(c.Instance)
			if err != nil {
				return d, err
			}
			ev, warnings, err := DecideKVModify(current, c)
			return d.With(names.Event("kv", c.Instance), ev, warnings), err
		}},
		{Verb: "kv.delete", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c KVDelete
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, names.Event("kv", c.Instance)) })
			if err != nil {
				return d, err
			}
			_, ok, err := v.KV(c.Instance)
			if err != nil {
				return d, err
			}
			ev, err := DecideKVDelete(ok, c)
			return d.With(names.Event("kv", c.Instance), ev, nil), err
		}},
	}
}
