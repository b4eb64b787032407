package backing

import "time"

// DevicesKind is the status kind of a node's report of its unused block devices:
// <prefix>.status.<node>.devices.<node>.
const DevicesKind = "devices"

// DeviceReport is an agent's report of the block devices on its host that a storage
// pool could be made of (LINSTOR's physical storage), as lsblk showed them at At; Error
// when lsblk could not be run or read.
type DeviceReport struct {
	Node    string    `json:"node"`
	At      time.Time `json:"at"`
	Error   string    `json:"error,omitempty"`
	Devices []Device  `json:"devices"`
}

// Device is one unused block device: a whole disk without partitions, signature or
// mount, writable and not empty.
type Device struct {
	Path       string `json:"path"`
	SizeBytes  uint64 `json:"size_bytes"`
	Rotational bool   `json:"rotational"`
	Model      string `json:"model,omitempty"`
	Serial     string `json:"serial,omitempty"`
	WWN        string `json:"wwn,omitempty"`
}
