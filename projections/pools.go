package projections

import (
	"fmt"
	"time"

	"github.com/cairn-io/cairn/events"
)

// Pool is a shared pool and who holds its import grant.
type Pool struct {
	Name    string   `json:"name"`
	Devices []string `json:"devices"`
	Nodes   []string `json:"nodes"`
	// Owner holds the grant ("" = nobody); GrantSeq is the event that granted it.
	Owner     string    `json:"owner,omitempty"`
	GrantSeq  uint64    `json:"grant_seq,omitempty"`
	GrantedAt time.Time `json:"granted_at,omitzero"`
	// Contested: another host wrote the pool while Owner held it; no new grant until
	// the pool is exported.
	Contested     bool   `json:"contested,omitempty"`
	ContestReason string `json:"contest_reason,omitempty"`
	ForeignHostID string `json:"foreign_hostid,omitempty"`
	CreatedSeq    uint64 `json:"created_seq"`
	Seq           uint64 `json:"seq"`
}

func poolKey(name string) string { return "v/pool/" + name }

func applyPool(t *tx, ev events.Event) error {
	if d, ok := ev.Data.(*events.PoolCreated); ok {
		return t.put(poolKey(d.Name), Pool{Name: d.Name, Devices: d.Devices, Nodes: d.Nodes, CreatedSeq: ev.Seq, Seq: ev.Seq})
	}
	var name string
	switch d := ev.Data.(type) {
	case *events.PoolImportGranted:
		name = d.Pool
	case *events.PoolExported:
		name = d.Pool
	case *events.PoolContested:
		name = d.Pool
	}
	var p Pool
	found, err := getJSON(t, poolKey(name), &p)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%s: pool %s does not exist", ev.Type, name)
	}
	switch d := ev.Data.(type) {
	case *events.PoolImportGranted:
		if p.Owner != "" && p.Owner != d.Node {
			queue(t, ev.Seq, p.Owner, KindZpool, p.Name) // the old owner must let go
		}
		p.Owner, p.GrantSeq, p.GrantedAt = d.Node, ev.Seq, ev.OccurredAt
		queue(t, ev.Seq, d.Node, KindZpool, p.Name)
	case *events.PoolExported:
		if p.Owner != "" {
			queue(t, ev.Seq, p.Owner, KindZpool, p.Name)
		}
		p.Owner, p.GrantSeq, p.GrantedAt = "", 0, time.Time{}
		p.Contested, p.ContestReason, p.ForeignHostID = false, "", ""
	case *events.PoolContested:
		p.Contested, p.ContestReason, p.ForeignHostID = true, d.Reason, d.ForeignHostID
		if p.Owner != "" {
			queue(t, ev.Seq, p.Owner, KindZpool, p.Name) // stays fenced: no import while contested
		}
	}
	p.Seq = ev.Seq
	return t.put(poolKey(p.Name), p)
}

// Pool returns a shared pool.
func (v *View) Pool(name string) (p Pool, ok bool, err error) {
	ok, err = getJSON(v.r, poolKey(name), &p)
	return
}

// Pools lists every shared pool by name.
func (v *View) Pools() ([]Pool, error) { return scanAll[Pool](v, "v/pool/") }
