package drbd

import "fmt"

// Converged reports whether a node carried out its desired state d of a resource and
// DRBD settled there, from the node's latest status report st (nil: none yet):
//
//   - d.Local nil (the resource is leaving the node): converged once the report is gone
//     or says removed;
//   - otherwise the report must say applied at d.Revision or later; and, when d.Active,
//     every volume's disk is UpToDate (Diskless on a diskless replica) and every peer that
//     shares a disk with it (one of the two has one) is Connected with every volume
//     Established (no resync under way).
//
// When not converged, why says what the node is still waiting for, in words for an
// operator ("n3: phase pending", "n3: volume 0 Inconsistent", …). Pure: no I/O.
func Converged(d Desired, st *Status) (ok bool, why string) {
	if d.Local == nil {
		if st == nil || st.Phase == PhaseRemoved {
			return true, ""
		}
		return false, fmt.Sprintf("%s: being removed (phase %s)", d.Node, st.Phase)
	}
	switch {
	case st == nil:
		return false, fmt.Sprintf("%s: no report yet", d.Node)
	case st.Phase == PhaseFailed:
		return false, fmt.Sprintf("%s: failed: %s", d.Node, st.Error)
	case st.Phase != PhaseApplied:
		return false, fmt.Sprintf("%s: phase %s", d.Node, st.Phase)
	case st.Revision < d.Revision:
		return false, fmt.Sprintf("%s: at revision %d of %d", d.Node, st.Revision, d.Revision)
	case !d.Active:
		return true, ""
	}
	wantDisk := "UpToDate"
	if d.Local.Diskless {
		wantDisk = "Diskless"
	}
	for _, v := range d.Volumes {
		if got := volumeDisk(st, v.Number); got != wantDisk {
			return false, fmt.Sprintf("%s: volume %d %s, want %s", d.Node, v.Number, orUnknown(got), wantDisk)
		}
	}
	for _, r := range d.Replicas {
		if r.Node == d.Node || (r.Diskless && d.Local.Diskless) {
			continue
		}
		p := peerOf(st, r.Node)
		if p == nil || p.Connection != "Connected" {
			conn := ""
			if p != nil {
				conn = p.Connection
			}
			return false, fmt.Sprintf("%s: peer %s %s", d.Node, r.Node, orUnknown(conn))
		}
		for _, v := range d.Volumes {
			if rep := peerReplication(p, v.Number); rep != "Established" {
				return false, fmt.Sprintf("%s: volume %d to %s %s", d.Node, v.Number, r.Node, orUnknown(rep))
			}
		}
	}
	return true, ""
}

func volumeDisk(st *Status, n int) string {
	for _, v := range st.Volumes {
		if v.Volume == n {
			return v.DiskState
		}
	}
	return ""
}

func peerOf(st *Status, node string) *PeerStatus {
	for i := range st.Peers {
		if st.Peers[i].Node == node {
			return &st.Peers[i]
		}
	}
	return nil
}

func peerReplication(p *PeerStatus, n int) string {
	for _, v := range p.Volumes {
		if v.Volume == n {
			return v.Replication
		}
	}
	return ""
}

func orUnknown(s string) string {
	if s == "" {
		return "not reported"
	}
	return s
}
