package projections

import (
	"strings"

	"github.com/cairn-io/cairn/events"
)

func kvKey(instance string) string { return "v/kv/" + instance }

// applyKV folds the key-value store events; handled is false for other types.
func applyKV(t *tx, ev events.Event) (handled bool, err error) {
	switch d := ev.Data.(type) {
	case *events.KVModified:
		var kv map[string]string
		if _, err := getJSON(t, kvKey(d.Instance), &kv); err != nil {
			return true, err
		}
		if kv = patched(kv, d.Set, d.Unset); kv == nil {
			t.del(kvKey(d.Instance))
			return true, nil
		}
		return true, t.put(kvKey(d.Instance), kv)
	case *events.KVDeleted:
		t.del(kvKey(d.Instance))
		return true, nil
	}
	return false, nil
}

// KV returns the keys of a key-value store instance (ok false when it has none).
func (v *View) KV(instance string) (kv map[string]string, ok bool, err error) {
	ok, err = getJSON(v.r, kvKey(instance), &kv)
	return
}

// KVInstance is one key-value store instance with its keys.
type KVInstance struct {
	Name  string
	Props map[string]string
}

// EachKVInstance calls fn with every instance in name order, one at a time, until fn
// returns false or an error (which EachKVInstance returns).
func (v *View) EachKVInstance(fn func(kv KVInstance) (more bool, err error)) error {
	return stopped(v.scan("v/kv/", func(key string, val []byte) error {
		kv := map[string]string{}
		if err := unmarshalInto(key, val, &kv); err != nil {
			return err
		}
		return goOn(fn(KVInstance{Name: strings.TrimPrefix(key, "v/kv/"), Props: kv}))
	}))
}
