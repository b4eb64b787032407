package policy

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/rs/zerolog"

	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/commands/resources"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/projections"
)

// FilesystemsMadeFrom returns the vd.filesystem-made commands a node's report calls
// for: each volume the report says it made a filesystem on (drbd.Status
// FilesystemsMade) that has none recorded yet. The command id derives from definition,
// volume, node and incarnation, so two serves, or a report folded again, record it once.
func FilesystemsMadeFrom(v *projections.View, st drbd.Status) ([]admission.Request, error) {
	if len(st.FilesystemsMade) == 0 {
		return nil, nil
	}
	rd, ok, err := v.ResourceDefinition(st.Resource)
	if err != nil || !ok {
		return nil, err
	}
	var out []admission.Request
	for _, vol := range rd.Volumes {
		typ, made := st.FilesystemsMade[vol.Volume]
		if !made || vol.Filesystem != nil {
			continue
		}
		body, _ := json.Marshal(resources.VolumeFilesystemMade{Resource: st.Resource, Volume: vol.Volume, Node: st.Node, Type: typ})
		out = append(out, admission.Request{Verb: "vd.filesystem-made", Body: body, Actor: "serve:filesystems", ForgetRefusals: true,
			CommandID: commandID("mkfs", st.Resource, strconv.Itoa(vol.Volume), st.Node, strconv.FormatUint(st.Incarnation, 10))})
	}
	return out, nil
}

// FilesystemRecorder records the filesystems nodes report made, while this serve holds
// the lease, at once for every report folded. A report folded while the lease was
// elsewhere is recorded at the node's next report (the agent reports it until the
// definition records it: its desired state keeps the order until then).
type FilesystemRecorder struct {
	Adm     *admission.Admission
	DB      *projections.DB
	Leading func() (uint64, bool)
	Log     zerolog.Logger
}

// Hook returns the status folder's DRBD hook.
func (f FilesystemRecorder) Hook(ctx context.Context) func(drbd.Status) {
	return func(st drbd.Status) {
		if len(st.FilesystemsMade) == 0 {
			return
		}
		if _, lead := f.Leading(); !lead {
			return
		}
		v, err := f.DB.Read()
		if err != nil {
			return
		}
		reqs, err := FilesystemsMadeFrom(v, st)
		v.Close()
		if err != nil {
			f.Log.Warn().Err(err).Str("resource", st.Resource).Msg("filesystem report not read")
			return
		}
		submitReports(ctx, f.Adm, f.Log, reqs, "made", "filesystem made")
	}
}
