package events

import "github.com/cairn-io/cairn/drbd"

// PropertiesChanged is the payload of every properties patch: Set are the keys set (to
// these values), Unset the keys removed; other keys keep their value.
type PropertiesChanged struct {
	Name  string            `json:"name"`
	Set   map[string]string `json:"set,omitempty"`
	Unset []string          `json:"unset,omitempty"`
}

// DefinitionPropertiesChanged: a patch of a resource definition's free-form properties
// (LINSTOR's properties outside DrbdOptions/, e.g. Aux/*), kept and shown as given.
type DefinitionPropertiesChanged PropertiesChanged

// GroupPropertiesChanged: a patch of a resource group's free-form properties.
type GroupPropertiesChanged PropertiesChanged

// VolumePropertiesChanged: a patch of one volume definition's free-form properties
// (LINSTOR's volume-definition properties, e.g. FileSystem/Type for linstor-gateway),
// kept and shown as given.
type VolumePropertiesChanged struct {
	Resource string            `json:"resource"`
	Volume   int               `json:"volume"`
	Set      map[string]string `json:"set,omitempty"`
	Unset    []string          `json:"unset,omitempty"`
}

func (*VolumePropertiesChanged) EventType() string { return "vd.properties-changed" }

// VolumeFilesystemMade: Node made the filesystem of volume Volume of Resource
// (FileSystem/Type), once; no node makes one there again.
type VolumeFilesystemMade struct {
	Resource string `json:"resource"`
	Volume   int    `json:"volume"`
	Node     string `json:"node"`
	Type     string `json:"type"`
}

func (*VolumeFilesystemMade) EventType() string { return "vd.filesystem-made" }

// ControllerPropertiesChanged: a patch of the deployment's free-form properties
// (LINSTOR's controller properties outside DrbdOptions/); Name is "controller".
type ControllerPropertiesChanged PropertiesChanged

func (*ControllerPropertiesChanged) EventType() string { return "controller.properties-changed" }

// ControllerOptionsChanged: a patch of the DRBD options of the whole deployment, the
// broadest level of the inheritance (controller, group, definition, replica).
type ControllerOptionsChanged struct {
	Set   drbd.Options `json:"set,omitzero"`
	Unset []string     `json:"unset,omitempty"`
}

func (*ControllerOptionsChanged) EventType() string    { return "controller.options-changed" }
func (*DefinitionPropertiesChanged) EventType() string { return "rd.properties-changed" }
func (*GroupPropertiesChanged) EventType() string      { return "rg.properties-changed" }

func init() {
	Register(Type{Name: "rd.properties-changed", Version: 1, New: func() Payload { return new(DefinitionPropertiesChanged) }})
	Register(Type{Name: "vd.properties-changed", Version: 1, New: func() Payload { return new(VolumePropertiesChanged) }})
	Register(Type{Name: "vd.filesystem-made", Version: 1, New: func() Payload { return new(VolumeFilesystemMade) }})
	Register(Type{Name: "rg.properties-changed", Version: 1, New: func() Payload { return new(GroupPropertiesChanged) }})
	Register(Type{Name: "controller.properties-changed", Version: 1, New: func() Payload { return new(ControllerPropertiesChanged) }})
	Register(Type{Name: "controller.options-changed", Version: 1, New: func() Payload { return new(ControllerOptionsChanged) }})
}
