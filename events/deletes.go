package events

// StoragePoolDeleted: a storage pool no replica used is gone from its node.
type StoragePoolDeleted struct {
	Node string `json:"node"`
	Name string `json:"name"`
}

// ResourceGroupDeleted: a group no definition belonged to is gone.
type ResourceGroupDeleted struct {
	Name string `json:"name"`
}

func (*StoragePoolDeleted) EventType() string   { return "sp.deleted" }
func (*ResourceGroupDeleted) EventType() string { return "rg.deleted" }

func init() {
	Register(Type{Name: "sp.deleted", Version: 1, New: func() Payload { return new(StoragePoolDeleted) }})
	Register(Type{Name: "rg.deleted", Version: 1, New: func() Payload { return new(ResourceGroupDeleted) }})
}
