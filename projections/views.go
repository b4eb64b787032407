package projections

import (
	"bytes"
	"errors"

	"strings"
	"time"

	"github.com/cairn-io/cairn/events"

	"github.com/cockroachdb/pebble/v2"
)

// Cluster is the cluster view.
type Cluster struct {
	Name           string    `json:"name"`
	FailureDomains bool      `json:"failure_domains"`
	DataChunks     int       `json:"data_chunks"`
	ParityChunks   int       `json:"parity_chunks"`
	CreatedAt      time.Time `json:"created_at"`
	CreatedSeq     uint64    `json:"created_seq"`
	Activated      bool      `json:"activated"`
	ActivatedAt    time.Time `json:"activated_at,omitzero"`
	ActivatedSeq   uint64    `json:"activated_seq,omitempty"`
}

// Domain is a failure domain: its label and the cluster-unique integer id allocated,
// once and for good, when the first node carried the label.
type Domain struct {
	Label    string `json:"label"`
	ID       int    `json:"id"`
	FirstSeq uint64 `json:"first_seq"`
}

// NodeSpec is what was asked of a node; only node.added and node.removed write it.
type NodeSpec struct {
	Name          string `json:"name"`
	Host          string `json:"host"`
	Address       string `json:"address"`
	FailureDomain string `json:"failure_domain,omitempty"`
	// FailureDomainID is the integer id of FailureDomain (0 without a label).
	FailureDomainID int               `json:"failure_domain_id,omitempty"`
	Role            string            `json:"role"`
	PhysicalLabel   string            `json:"physical_label,omitempty"`
	Properties      map[string]string `json:"properties,omitempty"`
	// Interfaces are the node's named network interfaces (name → address), nil until
	// node.interfaces-changed; PreferredInterface names the one the replication address
	// comes from when the node has it (LINSTOR's PrefNic).
	Interfaces         map[string]string `json:"interfaces,omitempty"`
	PreferredInterface string            `json:"preferred_interface,omitempty"`
	AddedAt            time.Time         `json:"added_at"`
	AddedSeq           uint64            `json:"added_seq"`
	// AddressSeq is the sequence of the event that gave the node its address (node.added
	// or node.address-changed): desired state naming it is at least that new.
	AddressSeq uint64 `json:"address_seq,omitempty"`
	// Maintenance is the node's maintenance mode (events.MaintenanceEvacuating or
	// events.MaintenanceEvicted; "" for none), with its reason, the sequence and time
	// of the node.maintenance-changed that set it.
	Maintenance       string    `json:"maintenance,omitempty"`
	MaintenanceReason string    `json:"maintenance_reason,omitempty"`
	MaintenanceSeq    uint64    `json:"maintenance_seq,omitempty"`
	MaintenanceSince  time.Time `json:"maintenance_since,omitempty"`
}

// NodeStatus is what is observed of a node; only node.state-changed writes it.
type NodeStatus struct {
	State         string    `json:"state"`
	Since         time.Time `json:"since"`
	Reason        string    `json:"reason,omitempty"`
	DevicesFailed int       `json:"devices_failed,omitempty"`
	Seq           uint64    `json:"seq"`
}

// Node joins a node's spec and status for reads.
type Node struct {
	Spec   NodeSpec   `json:"spec"`
	Status NodeStatus `json:"status"`
}

// Lvol is a logical volume and the node it is placed on.
type Lvol struct {
	Name       string `json:"name"`
	Node       string `json:"node"`
	SizeKiB    int64  `json:"size_kib"`
	Snapshots  int    `json:"snapshots"`
	CreatedSeq uint64 `json:"created_seq"`
}

// Snapshot is a snapshot of a logical volume, on the volume's node.
type Snapshot struct {
	Name       string `json:"name"`
	Lvol       string `json:"lvol"`
	Node       string `json:"node"`
	CreatedSeq uint64 `json:"created_seq"`
}

// HostEntry is a host as the failure-domain rules index it: its domain and how many of
// its storage nodes are in the cluster and online.
type HostEntry struct {
	Host               string `json:"host"`
	Domain             string `json:"domain"`
	Physical           string `json:"physical,omitempty"`
	StorageNodes       int    `json:"storage_nodes"`
	OnlineStorageNodes int    `json:"online_storage_nodes"`
}

// Usage counts what a node holds.
type Usage struct {
	Lvols     int `json:"lvols"`
	Snapshots int `json:"snapshots"`
}

// EventRef points at one stored event.
type EventRef struct {
	Seq     uint64 `json:"seq"`
	Type    string `json:"type"`
	Subject string `json:"subject"`
	// Digest is the request digest the event's envelope carries ("" before it existed).
	Digest string `json:"digest,omitempty"`
}

// CommandRecord lists the events an accepted command appended, in order, and the
// digest of the request that carried its id.
type CommandRecord struct {
	CommandID string     `json:"command_id"`
	Events    []EventRef `json:"events"`
	Digest    string     `json:"digest,omitempty"`
}

// Rejected records a stored message that is not a valid event (published around
// admission); the projector skips it deterministically and says why.
type Rejected struct {
	Seq     uint64 `json:"seq"`
	Subject string `json:"subject"`
	Reason  string `json:"reason"`
}

func nodeSpecKey(name string) string { return "v/node/" + name + "/spec" }

// nodeAddrKey indexes the nodes by replication address (what node.add and node.modify
// check a new address against). Views built before the index existed lack it: run
// cairn views rebuild once after upgrading.
func nodeAddrKey(address, name string) string { return "v/node-addr/" + address + "/" + name }
func nodeStatusKey(name string) string        { return "v/node/" + name + "/status" }
func commandPrefix(id string) string          { return "v/cmd/" + id + "/" }
func commandEventKey(id string, seq uint64) string {
	return string(appendCommandEventKey(make([]byte, 0, 6+len(id)+1+20), id, seq))
}

func appendCommandEventKey(b []byte, id string, seq uint64) []byte {
	b = append(b, "v/cmd/"...)
	b = append(b, id...)
	b = append(b, '/')
	return appendPadded(b, seq, 20)
}
func subjectKey(subject string) string { return "x/subj/" + subject }
func aggregateKey(agg string) string   { return "x/agg/" + agg }

func domainKey(label string) string  { return "v/domain/" + label }
func lvolKey(name string) string     { return "v/lvol/" + name }
func storeKey(host string) string    { return "v/store/" + host }
func hostKey(host string) string     { return "v/host/" + host }
func domainHostsKey(l string) string { return "v/hosts/" + l }
func usesPrefix(host string) string  { return "v/uses/" + host + "/" }
func usesStoreKey(host, primary string) string {
	return usesPrefix(host) + "s/" + primary
}
func usesJournalKey(host, owner string) string {
	return usesPrefix(host) + "j/" + owner
}

const onlineHostsKey = "v/online-hosts" // hosts with at least one online storage node
func journalKey(owner string) string    { return "v/journal/" + owner }
func snapshotKey(name string) string    { return "v/snapshot/" + name }
func usageKey(node string) string       { return "v/usage/" + node }

const lvolCountKey = "v/lvol-count" // logical volumes in the cluster

const (
	clusterKey     = "v/cluster"
	domainCountKey = "v/domain-count" // the last allocated failure-domain id
)

// View is a consistent read of every view at one checkpoint. Close it when done.
type View struct {
	snap  *pebble.Snapshot
	r     reader
	seq   uint64
	nodes []Node // Nodes, read once: the snapshot never changes
	// cluster is Cluster, read once (a command's decision asks for it several times).
	cluster     *Cluster
	clusterSeen bool
	// trace, when set (Traced), is told every key read and every range scanned; base
	// is then the view untraced (Unchecked).
	trace func(Read)
	base  *View
}

// Read is one read a View made: a point read of Key, or a scan of the keys from Key
// up to (not including) End.
type Read struct {
	Key, End string
}

// Traced returns a view on the same snapshot that tells fn every read made through it,
// for checkers that compare what a decision read with the boundary it declared
// (commands' read-set checker). Closing either closes both.
func (v *View) Traced(fn func(Read)) *View {
	t := &View{snap: v.snap, seq: v.seq, trace: fn, base: v.Unchecked()}
	t.r = tracedReader{r: v.r, fn: fn}
	return t
}

// Unchecked is the same view without the trace: reads a decision makes by design
// outside its boundary go through it, each with a comment saying why the boundary need
// not cover them, so that the read-set checker sees every other read.
func (v *View) Unchecked() *View {
	if v.base != nil {
		return v.base
	}
	return v
}

// tracedReader tells fn each key it reads.
type tracedReader struct {
	r  reader
	fn func(Read)
}

func (t tracedReader) Get(key []byte) ([]byte, error) {
	t.fn(Read{Key: string(key)})
	return t.r.Get(key)
}

// newIter opens an iterator on the snapshot, telling the trace what it ranges over.
func (v *View) newIter(o *pebble.IterOptions) (*pebble.Iterator, error) {
	if v.trace != nil {
		v.trace(Read{Key: string(o.LowerBound), End: string(o.UpperBound)})
	}
	return v.snap.NewIter(o)
}

// Read opens a consistent view of the store as of its current checkpoint.
func (db *DB) Read() (*View, error) {
	snap := db.pdb.NewSnapshot()
	r := pebbleReader{get: func(k []byte) ([]byte, interface{ Close() error }, error) {
		v, c, err := snap.Get(k)
		if c == nil {
			return v, nil, err
		}
		return v, c, err
	}}
	seq, err := getUint(r, string(keyCheckpoint))
	if err != nil {
		snap.Close()
		return nil, err
	}
	return &View{snap: snap, r: r, seq: seq}, nil
}

// Close releases the view.
func (v *View) Close() error { return v.snap.Close() }

// Seq is the stream sequence of the last event the view reflects.
func (v *View) Seq() uint64 { return v.seq }

// Cluster returns the cluster; ok is false before cluster.created.
func (v *View) Cluster() (c Cluster, ok bool, err error) {
	if v.clusterSeen {
		if v.cluster == nil {
			return Cluster{}, false, nil
		}
		return *v.cluster, true, nil
	}
	if ok, err = getJSON(v.r, clusterKey, &c); err != nil {
		return Cluster{}, false, err
	}
	v.clusterSeen = true
	if ok {
		v.cluster = &c
	}
	return c, ok, nil
}

// Node returns a node that is in the cluster; ok is false for unknown or removed nodes.
func (v *View) Node(name string) (n Node, ok bool, err error) {
	if ok, err = getJSON(v.r, nodeSpecKey(name), &n.Spec); !ok || err != nil {
		return
	}
	_, err = getJSON(v.r, nodeStatusKey(name), &n.Status)
	return
}

// NodesAt lists the nodes with the replication address, by name.
//
// At most limit names (0: all), in name order; more reports that there are others.
func (v *View) NodesAt(address string, limit int) (names []string, more bool, err error) {
	prefix := "v/node-addr/" + address + "/"
	err = stopped(v.scan(prefix, func(key string, _ []byte) error {
		if limit > 0 && len(names) == limit {
			more = true
			return errStopEach
		}
		names = append(names, strings.TrimPrefix(key, prefix))
		return nil
	}))
	return names, more, err
}

// Nodes returns every node in the cluster in key order (see EachNode). The slice is shared by
// every caller of this view: do not modify it.
func (v *View) Nodes() ([]Node, error) {
	if v.nodes != nil {
		return v.nodes, nil
	}
	out := []Node{}
	err := v.EachNode("", func(n Node) (bool, error) {
		out = append(out, n)
		return true, nil
	})
	if err == nil {
		v.nodes = out
	}
	return out, err
}

// EachNode calls fn with every node (spec and status) in the views' key order, one at
// a time, until fn returns false or an error (which EachNode returns). With after, it
// starts past that node's keys: pages cut at a node's name neither skip nor repeat a
// node. Key order is name order but for a name that others extend with '-' or '.'
// (those sort before the '/' after it: n1-a, n1.b, n1).
func (v *View) EachNode(after string, fn func(n Node) (more bool, err error)) error {
	var cur Node
	curName := "" // the node whose keys are being read; "" before the first
	from := []byte("v/node/")
	if after != "" {
		from = prefixEnd([]byte("v/node/" + after + "/"))
	}
	err := v.scanRange(from, prefixEnd([]byte("v/node/")), func(key string, val []byte) error {
		name, part, _ := strings.Cut(strings.TrimPrefix(key, "v/node/"), "/")
		if name != curName {
			if curName != "" {
				if err := goOn(fn(cur)); err != nil {
					return err
				}
			}
			cur, curName = Node{}, name
		}
		switch part {
		case "spec":
			return unmarshalInto(key, val, &cur.Spec)
		case "status":
			return unmarshalInto(key, val, &cur.Status)
		}
		return nil
	})
	if err == nil && curName != "" {
		err = goOn(fn(cur))
	}
	return stopped(err)
}

// Lvol returns a logical volume; ok is false if it does not exist.
func (v *View) Lvol(name string) (l Lvol, ok bool, err error) {
	ok, err = getJSON(v.r, lvolKey(name), &l)
	return
}

// Snapshot returns a snapshot; ok is false if it does not exist.
func (v *View) Snapshot(name string) (s Snapshot, ok bool, err error) {
	ok, err = getJSON(v.r, snapshotKey(name), &s)
	return
}

// Usage returns what a node holds (zero for none).
func (v *View) Usage(node string) (u Usage, err error) {
	_, err = getJSON(v.r, usageKey(node), &u)
	return
}

// HoldsData reports whether any logical volume exists.
func (v *View) HoldsData() (bool, error) {
	n, err := getUint(v.r, lvolCountKey)
	return n > 0, err
}

// Host returns a host's index entry; ok is false for a host with no storage node.
func (v *View) Host(host string) (h HostEntry, ok bool, err error) {
	ok, err = getJSON(v.r, hostKey(host), &h)
	return
}

// HostRef is a host in its domain's host list, with its physical label.
type HostRef struct {
	Host     string `json:"host"`
	Physical string `json:"physical,omitempty"`
}

// DomainHosts returns the storage hosts of every domain that has one, by label, sorted
// by host: one key per domain, whatever the cluster's size.
func (v *View) DomainHosts() (map[string][]HostRef, error) {
	out := map[string][]HostRef{}
	err := v.scan("v/hosts/", func(key string, val []byte) error {
		var hosts []HostRef
		if err := unmarshalInto(key, val, &hosts); err != nil {
			return err
		}
		out[strings.TrimPrefix(key, "v/hosts/")] = hosts
		return nil
	})
	return out, err
}

// OnlineHosts counts the hosts with at least one online storage node.
func (v *View) OnlineHosts() (int, error) {
	n, err := getUint(v.r, onlineHostsKey)
	return int(n), err
}

// Uses returns the volume stores (by primary) that have a failover path on host and the
// journal sets (by owner) that hold a copy there.
func (v *View) Uses(host string) (stores, journals []string, err error) {
	p := usesPrefix(host)
	err = v.scan(p, func(key string, val []byte) error {
		rest := strings.TrimPrefix(key, p)
		switch {
		case strings.HasPrefix(rest, "s/"):
			stores = append(stores, rest[2:])
		case strings.HasPrefix(rest, "j/"):
			journals = append(journals, rest[2:])
		}
		return nil
	})
	return
}

// Store returns the recorded volume store of a host.
func (v *View) Store(host string) (s events.StoreHosts, ok bool, err error) {
	ok, err = getJSON(v.r, storeKey(host), &s)
	return
}

// Journal returns the recorded journal set of a host.
func (v *View) Journal(owner string) (j events.JournalSet, ok bool, err error) {
	ok, err = getJSON(v.r, journalKey(owner), &j)
	return
}

// VolumeStores returns the recorded volume stores, by primary host.
func (v *View) VolumeStores() ([]events.StoreHosts, error) {
	return scanAll[events.StoreHosts](v, "v/store/")
}

// JournalSets returns the recorded journal sets, by owner host.
func (v *View) JournalSets() ([]events.JournalSet, error) {
	return scanAll[events.JournalSet](v, "v/journal/")
}

// Domains returns every failure domain ever created, sorted by label.
func (v *View) Domains() ([]Domain, error) { return scanAll[Domain](v, "v/domain/") }

// Command returns the record of an accepted command; ok is false if the id is unknown.
func (v *View) Command(id string) (rec CommandRecord, ok bool, err error) {
	rec.CommandID = id
	err = v.scan(commandPrefix(id), func(key string, val []byte) error {
		var e EventRef
		if err := unmarshalInto(key, val, &e); err != nil {
			return err
		}
		rec.Events = append(rec.Events, e)
		if rec.Digest == "" {
			rec.Digest = e.Digest
		}
		return nil
	})
	return rec, len(rec.Events) > 0, err
}

// SubjectSeq returns the sequence of the last event on subject (0 for none).
func (v *View) SubjectSeq(subject string) (uint64, error) {
	return getUint(v.r, subjectKey(subject))
}

// AggregateSeq returns the sequence of the last event of an aggregate type (0 for none).
func (v *View) AggregateSeq(aggregate string) (uint64, error) {
	return getUint(v.r, aggregateKey(aggregate))
}

// Rejected lists the stored messages the projector skipped as invalid.
func (v *View) Rejected() ([]Rejected, error) { return scanAll[Rejected](v, "v/rejected/") }

// errStopEach ends an each walk early without an error.
var errStopEach = errors.New("stop")

// eachOf decodes the values under prefix one at a time, in key order, and calls fn with
// each until it returns false or an error (which eachOf returns).
func eachOf[T any](v *View, prefix string, fn func(T) (more bool, err error)) error {
	return stopped(v.scan(prefix, func(key string, val []byte) error {
		var x T
		if err := unmarshalInto(key, val, &x); err != nil {
			return err
		}
		return goOn(fn(x))
	}))
}

// goOn turns an each callback's answer into scan's: errStopEach when it asks to stop.
func goOn(more bool, err error) error {
	if err == nil && !more {
		return errStopEach
	}
	return err
}

// stopped is a walk's error with an asked-for stop as none.
func stopped(err error) error {
	if errors.Is(err, errStopEach) {
		return nil
	}
	return err
}

// scanAll decodes every value under prefix, in key order.
func scanAll[T any](v *View, prefix string) ([]T, error) {
	var out []T
	err := eachOf(v, prefix, func(x T) (bool, error) {
		out = append(out, x)
		return true, nil
	})
	return out, err
}

// Page is one page of a list in key order: the items (their JSON as the views hold it)
// after a cursor, and the cursor of the next page ("" on the last).
type Page struct {
	Items [][]byte
	Next  string
}

// Kinds of list Pages serves, by key prefix.
const (
	ListResourceDefinitions = "v/rd/"
	ListResourceGroups      = "v/rg/"
	ListStoragePools        = "v/sp/" // cursor: <node>/<pool>
	ListPools               = "v/pool/"
)

// PagesRaw reads up to limit items of a list (ListResourceDefinitions, …) after cursor
// (exclusive; "" from the start), in key order, reading no further than it returns.
// Every item is as the views hold it, its JSON, not decoded: a list answered as stored
// costs a copy per item instead of a decode and an encode.
func PagesRaw(v *View, list, after string, limit int) (Page, error) {
	lower := []byte(list)
	if after != "" {
		lower = append([]byte(list+after), 0)
	}
	it, err := v.newIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd([]byte(list))})
	if err != nil {
		return Page{}, err
	}
	defer it.Close()
	var p Page
	last := ""
	for it.First(); it.Valid(); it.Next() {
		if len(p.Items) == limit {
			p.Next = last
			break
		}
		p.Items = append(p.Items, bytes.Clone(it.Value()))
		last = strings.TrimPrefix(string(it.Key()), list)
	}
	return p, it.Error()
}

func (v *View) scan(prefix string, fn func(key string, val []byte) error) error {
	return v.scanRange([]byte(prefix), prefixEnd([]byte(prefix)), fn)
}

// scanRange calls fn for every key in [from, to) in order.
func (v *View) scanRange(from, to []byte, fn func(key string, val []byte) error) error {
	it, err := v.newIter(&pebble.IterOptions{LowerBound: from, UpperBound: to})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if err := fn(string(it.Key()), it.Value()); err != nil {
			return err
		}
	}
	return it.Error()
}

func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	end[len(end)-1]++
	return end
}
