package events

// KVModified: keys of a key-value store instance were set (Set) and removed (Unset).
// LINSTOR's key-value store, which its integrations keep their own state in.
type KVModified struct {
	Instance string            `json:"instance"`
	Set      map[string]string `json:"set,omitempty"`
	Unset    []string          `json:"unset,omitempty"`
}

// KVDeleted: a key-value store instance and all its keys are gone.
type KVDeleted struct {
	Instance string `json:"instance"`
}

func (*KVModified) EventType() string { return "kv.modified" }
func (*KVDeleted) EventType() string  { return "kv.deleted" }

func init() {
	Register(Type{Name: "kv.modified", Version: 1, New: func() Payload { return new(KVModified) }})
	Register(Type{Name: "kv.deleted", Version: 1, New: func() Payload { return new(KVDeleted) }})
}
