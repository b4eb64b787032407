package projections

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-io/cairn/events"
)

// Item is one stored message on its way to the views: decoded, or with the reason it
// could not be.
type Item struct {
	Event events.Event
	Raw   events.Raw
	Err   error
	// undecoded: the decoder skipped it as already in the views.
	undecoded bool
}

// apply folds one item into the transaction. Apply is deterministic: it reads nothing
// but the views and the event (never the clock), so replaying the stream rebuilds
// exactly the same views.
func apply(t *tx, names events.Names, it Item) error {
	t.seq = it.Raw.Seq
	if it.Err != nil {
		// Not an event: recorded as rejected, and its subject's boundary moves past it
		// (the stream's last sequence on that subject is this message now), so that
		// admission's next conditional append on the subject expects it; otherwise one
		// junk publish would make every later command on the subject fail.
		t.putUint(subjectKey(it.Raw.Subject), it.Raw.Seq)
		if agg := names.Aggregate(it.Raw.Subject); agg != "" {
			t.putUint(aggregateKey(agg), it.Raw.Seq)
		}
		return t.put(fmt.Sprintf("v/rejected/%020d", it.Raw.Seq), Rejected{Seq: it.Raw.Seq, Subject: it.Raw.Subject, Reason: it.Err.Error()})
	}
	ev := it.Event
	t.putUint(subjectKey(ev.Subject), ev.Seq)
	if agg := names.Aggregate(ev.Subject); agg != "" {
		t.putUint(aggregateKey(agg), ev.Seq)
	}
	// One key per event of a command: no read-modify-write on the hot path.
	t.scratch = appendCommandEventKey(t.scratch[:0], ev.CommandID, ev.Seq)
	key := len(t.scratch)
	t.scratch = appendEventRef(t.scratch, EventRef{Seq: ev.Seq, Type: ev.Type, Subject: ev.Subject, Digest: ev.RequestDigest})
	t.putOnce(t.scratch[:key], t.scratch[key:])
	if t.retention > 0 {
		// Written at the commit, after the command records: each run of keys goes
		// into the memtable in order (see tx.commit).
		k := commandAtKey(ev.OccurredAt, ev.CommandID, ev.Seq)
		t.cmdAt = append(t.cmdAt, k)
		if t.cmdAtMin == "" || k < t.cmdAtMin {
			t.cmdAtMin = k
		}
		if t.pruneEvery > 0 && ev.Seq%t.pruneEvery == 0 {
			if err := pruneCommands(t, ev.OccurredAt.Add(-t.retention)); err != nil {
				return err
			}
		}
	}

	if handled, err := applyResource(t, ev); handled || err != nil {
		return err
	}
	if handled, err := applyToken(t, ev); handled || err != nil {
		return err
	}
	if handled, err := applyKV(t, ev); handled || err != nil {
		return err
	}
	if handled, err := applyFile(t, ev); handled || err != nil {
		return err
	}
	if handled, err := applyBackup(t, ev); handled || err != nil {
		return err
	}
	if handled, err := applySchedule(t, ev); handled || err != nil {
		return err
	}
	switch d := ev.Data.(type) {
	case *events.ClusterCreated:
		return t.put(clusterKey, Cluster{Name: d.Name, FailureDomains: d.FailureDomains,
			DataChunks: d.DataChunks, ParityChunks: d.ParityChunks, CreatedAt: ev.OccurredAt, CreatedSeq: ev.Seq})
	case *events.ClusterActivated:
		var c Cluster
		if _, err := getJSON(t, clusterKey, &c); err != nil {
			return err
		}
		if !c.Activated {
			c.Activated, c.ActivatedAt, c.ActivatedSeq = true, ev.OccurredAt, ev.Seq
		}
		if err := putPlacement(t, d.VolumeStores, d.JournalSets); err != nil {
			return err
		}
		return t.put(clusterKey, c)
	case *events.PlacementUpdated:
		if d.RemovedHost != "" {
			var own events.StoreHosts
			if _, err := getJSON(t, storeKey(d.RemovedHost), &own); err != nil {
				return err
			}
			for _, p := range []string{own.Secondary, own.Tertiary} {
				if p != "" {
					t.del(usesStoreKey(p, d.RemovedHost))
				}
			}
			var js events.JournalSet
			if _, err := getJSON(t, journalKey(d.RemovedHost), &js); err != nil {
				return err
			}
			for _, m := range js.Members {
				t.del(usesJournalKey(m, d.RemovedHost))
			}
			t.del(storeKey(d.RemovedHost))
			t.del(journalKey(d.RemovedHost))
		}
		for _, m := range d.Moves {
			t.del(usesStoreKey(m.From, m.Primary))
			t.mark(usesStoreKey(m.To, m.Primary))
			var s events.StoreHosts
			if _, err := getJSON(t, storeKey(m.Primary), &s); err != nil {
				return err
			}
			if m.Path == "secondary" {
				s.Secondary = m.To
			} else {
				s.Tertiary = m.To
			}
			if err := t.put(storeKey(m.Primary), s); err != nil {
				return err
			}
		}
		for _, r := range d.Replacements {
			t.del(usesJournalKey(r.From, r.Owner))
			if r.To != "" {
				t.mark(usesJournalKey(r.To, r.Owner))
			}
			var js events.JournalSet
			if _, err := getJSON(t, journalKey(r.Owner), &js); err != nil {
				return err
			}
			members := js.Members[:0:0]
			for _, m := range js.Members {
				if m != r.From {
					members = append(members, m)
				}
			}
			if r.To != "" {
				members = append(members, r.To)
			}
			js.Members = members
			if err := t.put(journalKey(r.Owner), js); err != nil {
				return err
			}
		}
		return putPlacement(t, d.VolumeStores, d.JournalSets)
	case *events.NodeAdded:
		domainID, err := domainID(t, d.FailureDomain, ev.Seq)
		if err != nil {
			return err
		}
		if err := t.putNodeSpec(NodeSpec{Name: d.Name, Host: d.Host, Address: d.Address,
			FailureDomain: d.FailureDomain, FailureDomainID: domainID, Role: d.Role, PhysicalLabel: d.PhysicalLabel, Properties: d.Properties, AddedAt: ev.OccurredAt, AddedSeq: ev.Seq, AddressSeq: ev.Seq}); err != nil {
			return err
		}
		t.mark(nodeAddrKey(d.Address, d.Name))
		if d.Role == events.RoleStorage {
			if err := hostChange(t, d.Host, d.FailureDomain, d.PhysicalLabel, 1, 1); err != nil {
				return err
			}
		}
		// A node is presumed online when it joins; the watchdog corrects that if no
		// heartbeat follows.
		return t.put(nodeStatusKey(d.Name), NodeStatus{State: events.StateOnline, Since: ev.OccurredAt, Reason: "added", Seq: ev.Seq})
	case *events.LvolCreated:
		if err := addUsage(t, d.Node, 1, 0); err != nil {
			return err
		}
		n, err := getUint(t, lvolCountKey)
		if err != nil {
			return err
		}
		t.putUint(lvolCountKey, n+1)
		return t.put(lvolKey(d.Name), Lvol{Name: d.Name, Node: d.Node, SizeKiB: d.SizeKiB, CreatedSeq: ev.Seq})
	case *events.LvolDeleted:
		if err := addUsage(t, d.Node, -1, 0); err != nil {
			return err
		}
		n, err := getUint(t, lvolCountKey)
		if err != nil {
			return err
		}
		if n > 0 {
			t.putUint(lvolCountKey, n-1)
		}
		t.del(lvolKey(d.Name))
		return nil
	case *events.SnapshotCreated:
		if err := addUsage(t, d.Node, 0, 1); err != nil {
			return err
		}
		if err := countSnapshot(t, d.Lvol, 1); err != nil {
			return err
		}
		return t.put(snapshotKey(d.Name), Snapshot{Name: d.Name, Lvol: d.Lvol, Node: d.Node, CreatedSeq: ev.Seq})
	case *events.SnapshotDeleted:
		t.del(snapshotKey(d.Name))
		if err := countSnapshot(t, d.Lvol, -1); err != nil {
			return err
		}
		return addUsage(t, d.Node, 0, -1)
	case *events.NodeRemoved:
		var st NodeStatus
		spec, _, err := t.nodeSpec(d.Name)
		if err != nil {
			return err
		}
		t.del(nodeAddrKey(spec.Address, d.Name))
		if _, err := getJSON(t, nodeStatusKey(d.Name), &st); err != nil {
			return err
		}
		if spec.Role == events.RoleStorage {
			online := 0
			if st.State == events.StateOnline {
				online = -1
			}
			if err := hostChange(t, spec.Host, spec.FailureDomain, spec.PhysicalLabel, -1, online); err != nil {
				return err
			}
		}
		t.delNodeSpec(d.Name)
		t.del(nodeStatusKey(d.Name))
		return nil
	case *events.NodeAddressChanged:
		spec, found, err := t.nodeSpec(d.Name)
		if err != nil || !found {
			return err
		}
		t.del(nodeAddrKey(d.Previous, d.Name))
		t.mark(nodeAddrKey(d.Address, d.Name))
		spec.Address, spec.AddressSeq = d.Address, ev.Seq
		if err := t.putNodeSpec(spec); err != nil {
			return err
		}
		return requeueNodePeers(t, d.Name, ev.Seq)
	case *events.NodeMaintenanceChanged:
		spec, found, err := t.nodeSpec(d.Name)
		if err != nil || !found {
			return err
		}
		spec.Maintenance, spec.MaintenanceReason, spec.MaintenanceSeq, spec.MaintenanceSince = d.Mode, d.Reason, ev.Seq, ev.OccurredAt
		return t.putNodeSpec(spec)
	case *events.NodeInterfacesChanged:
		spec, found, err := t.nodeSpec(d.Name)
		if err != nil || !found {
			return err
		}
		spec.Interfaces, spec.PreferredInterface = d.Interfaces, d.Preferred
		return t.putNodeSpec(spec)
	case *events.NodePropertiesChanged:
		spec, found, err := t.nodeSpec(d.Name)
		if err != nil || !found {
			return err
		}
		spec.Properties = patched(spec.Properties, d.Set, d.Unset)
		return t.putNodeSpec(spec)
	case *events.NodeStateChanged:
		spec, _, err := t.nodeSpec(d.Name)
		if err != nil {
			return err
		}
		if spec.Role == events.RoleStorage && d.State != d.Previous {
			delta := 1
			if d.State != events.StateOnline {
				delta = -1
			}
			if err := hostChange(t, spec.Host, spec.FailureDomain, spec.PhysicalLabel, 0, delta); err != nil {
				return err
			}
		}
		since := ev.OccurredAt
		if d.State == d.Previous { // only the devices changed: the state keeps its age
			var cur NodeStatus
			if _, err := getJSON(t, nodeStatusKey(d.Name), &cur); err != nil {
				return err
			}
			since = cur.Since
		}
		return t.put(nodeStatusKey(d.Name), NodeStatus{State: d.State, Since: since, Reason: d.Reason, DevicesFailed: d.DevicesFailed, Seq: ev.Seq})
	}
	return nil
}

// putPlacement records volume stores and journal sets (replacing those of the same hosts).
func putPlacement(t *tx, stores []events.StoreHosts, journals []events.JournalSet) error {
	for _, s := range stores {
		if err := t.put(storeKey(s.Primary), s); err != nil {
			return err
		}
		for _, p := range []string{s.Secondary, s.Tertiary} {
			if p != "" {
				t.mark(usesStoreKey(p, s.Primary))
			}
		}
	}
	for _, j := range journals {
		if err := t.put(journalKey(j.Owner), j); err != nil {
			return err
		}
		for _, m := range j.Members {
			t.mark(usesJournalKey(m, j.Owner))
		}
	}
	return nil
}

// hostChange keeps the host index: a host's storage nodes in the cluster and online,
// the sorted host list of its domain on failure-domain clusters (a host joins it with its
// first storage node and leaves with its last), and the count of hosts with an online
// storage node.
func hostChange(t *tx, host, domain, physical string, nodes, online int) error {
	h, err := t.hostEntry(host)
	if err != nil {
		return err
	}
	wasPresent, wasOnline := h.StorageNodes > 0, h.OnlineStorageNodes > 0
	h.Host = host
	if h.Domain == "" || !wasPresent {
		h.Domain, h.Physical = domain, physical // the host's first storage node names them
	}
	h.StorageNodes += nodes
	h.OnlineStorageNodes = max(h.OnlineStorageNodes+online, 0)
	isPresent, isOnline := h.StorageNodes > 0, h.OnlineStorageNodes > 0
	fd, err := failureDomains(t)
	if err != nil {
		return err
	}
	// Only failure-domain clusters keep domain host lists: a label on a cluster without
	// domains is recorded on the node alone, so its node.add costs what one without does.
	if wasPresent != isPresent && h.Domain != "" && fd {
		var hosts []HostRef
		if _, err := getJSON(t, domainHostsKey(h.Domain), &hosts); err != nil {
			return err
		}
		i, found := slices.BinarySearchFunc(hosts, host, func(r HostRef, h string) int { return strings.Compare(r.Host, h) })
		switch {
		case isPresent && !found:
			hosts = slices.Insert(hosts, i, HostRef{Host: host, Physical: h.Physical})
		case !isPresent && found:
			hosts = slices.Delete(hosts, i, i+1)
		}
		if len(hosts) == 0 {
			t.del(domainHostsKey(h.Domain))
		} else if err := t.put(domainHostsKey(h.Domain), hosts); err != nil {
			return err
		}
	}
	if wasOnline != isOnline {
		n, err := getUint(t, onlineHostsKey)
		if err != nil {
			return err
		}
		if isOnline {
			n++
		} else if n > 0 {
			n--
		}
		t.putUint(onlineHostsKey, n)
	}
	if !isPresent {
		t.hosts[host] = HostEntry{}
		t.del(hostKey(host))
		return nil
	}
	t.hosts[host] = h
	return t.put(hostKey(host), h)
}

// countSnapshot changes a logical volume's snapshot count.
func countSnapshot(t *tx, lvol string, delta int) error {
	var l Lvol
	ok, err := getJSON(t, lvolKey(lvol), &l)
	if err != nil || !ok {
		return err
	}
	l.Snapshots += delta
	return t.put(lvolKey(lvol), l)
}

// addUsage changes a node's volume and snapshot counts.
func addUsage(t *tx, node string, lvols, snapshots int) error {
	var u Usage
	if _, err := getJSON(t, usageKey(node), &u); err != nil {
		return err
	}
	u.Lvols += lvols
	u.Snapshots += snapshots
	if u == (Usage{}) {
		t.del(usageKey(node))
		return nil
	}
	return t.put(usageKey(node), u)
}

// failureDomains reports whether the cluster has failure domains on (false before
// cluster.create).
func failureDomains(t *tx) (bool, error) {
	var cl Cluster
	_, err := getJSON(t, clusterKey, &cl)
	return cl.FailureDomains, err
}

// domainID returns the integer id of a failure-domain label, allocating the next one
// when the label is new. Ids are allocated once in stream order, so every replay hands
// out the same ones, and never change.
func domainID(t *tx, label string, seq uint64) (int, error) {
	if label == "" {
		return 0, nil
	}
	var d Domain
	if ok, err := getJSON(t, domainKey(label), &d); err != nil || ok {
		return d.ID, err
	}
	last, err := getUint(t, domainCountKey)
	if err != nil {
		return 0, err
	}
	d = Domain{Label: label, ID: int(last) + 1, FirstSeq: seq}
	t.putUint(domainCountKey, last+1)
	return d.ID, t.put(domainKey(label), d)
}
