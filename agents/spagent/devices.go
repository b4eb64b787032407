package spagent

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/storage/backing"
)

// LsblkArgv is how the agent asks lsblk for the host's block devices (sizes in bytes,
// JSON, partitions as children).
var LsblkArgv = []string{"lsblk", "-J", "-b", "-o", "NAME,PATH,SIZE,ROTA,TYPE,RO,FSTYPE,MOUNTPOINT,MODEL,SERIAL,WWN"}

// lsblkDevice is one device of lsblk's JSON. Numbers and booleans are JSON ones in
// recent util-linux, strings ("4000787030016", "0"/"1") in older ones: number and flag
// read both.
type lsblkDevice struct {
	Name       string        `json:"name"`
	Path       string        `json:"path"`
	Size       number        `json:"size"`
	Rota       flag          `json:"rota"`
	Type       string        `json:"type"`
	RO         flag          `json:"ro"`
	FSType     *string       `json:"fstype"`
	Mountpoint *string       `json:"mountpoint"`
	Model      *string       `json:"model"`
	Serial     *string       `json:"serial"`
	WWN        *string       `json:"wwn"`
	Children   []lsblkDevice `json:"children"`
}

type flag bool

type number uint64

func (n *number) UnmarshalJSON(b []byte) error {
	v, err := strconv.ParseUint(strings.Trim(string(b), `"`), 10, 64)
	if err != nil {
		return fmt.Errorf("lsblk: %s is not a size", b)
	}
	*n = number(v)
	return nil
}

func (f *flag) UnmarshalJSON(b []byte) error {
	switch strings.Trim(string(b), `"`) {
	case "true", "1":
		*f = true
	case "false", "0", "null", "":
		*f = false
	default:
		return fmt.Errorf("lsblk: %s is not a flag", b)
	}
	return nil
}

// MinDeviceBytes: a device must be larger to be listed (LINSTOR's criterion: 1 GiB).
const MinDeviceBytes = 1 << 30

// UnusedDevices parses lsblk's JSON (LsblkArgv) into the devices a pool could be made
// of: whole disks (type disk) that are writable, larger than MinDeviceBytes, and hold
// nothing (no partitions, no file system or other signature, no mount). Loop, ROM, RAM and DRBD
// devices, partitions and device-mapper volumes are never listed.
func UnusedDevices(lsblkJSON []byte) ([]backing.Device, error) {
	var out struct {
		Blockdevices []lsblkDevice `json:"blockdevices"`
	}
	if err := json.Unmarshal(lsblkJSON, &out); err != nil {
		return nil, fmt.Errorf("lsblk output: %w", err)
	}
	devices := []backing.Device{}
	for _, d := range out.Blockdevices {
		if d.Type != "disk" || bool(d.RO) || d.Size <= MinDeviceBytes || len(d.Children) > 0 || str(d.FSType) != "" || str(d.Mountpoint) != "" ||
			strings.HasPrefix(d.Name, "drbd") || strings.HasPrefix(d.Name, "zram") {
			continue
		}
		path := d.Path
		if path == "" {
			path = "/dev/" + d.Name
		}
		devices = append(devices, backing.Device{Path: path, SizeBytes: uint64(d.Size), Rotational: bool(d.Rota),
			Model: strings.TrimSpace(str(d.Model)), Serial: strings.TrimSpace(str(d.Serial)), WWN: str(d.WWN)})
	}
	return devices, nil
}

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// reportDevices runs lsblk and publishes what it found (or why it could not) on
// <prefix>.status.<node>.devices.<node>; without an Exec it reports nothing.
func (r *Reporter) reportDevices(ctx context.Context) {
	if r.cfg.Exec == nil {
		return
	}
	rep := backing.DeviceReport{Node: r.cfg.Node, At: time.Now().UTC(), Devices: []backing.Device{}}
	out, err := r.cfg.Exec.Run(ctx, LsblkArgv, execx.Options{})
	if err == nil {
		rep.Devices, err = UnusedDevices(out)
	}
	if err != nil {
		rep.Error = err.Error()
		r.cfg.Log.Warn().Err(err).Msg("block devices not listed")
	}
	if r.cfg.Pub == nil {
		return
	}
	body, _ := json.Marshal(rep)
	if err := r.cfg.Pub.Publish(r.cfg.Names.Status(r.cfg.Node, backing.DevicesKind, r.cfg.Node), body); err != nil {
		r.cfg.Log.Warn().Err(err).Msg("block device report not sent")
	}
}
