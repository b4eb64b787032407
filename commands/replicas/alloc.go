// Package replicas holds the pure rules of the DRBD resource model: allocation of node
// ids, ports and minors, autoplacement of replicas and the tiebreaker rule. Functions
// take plain values and return plain values; admission gathers the inputs from the views
// and appends what they decide.
package replicas

import (
	"fmt"
	"slices"

	"github.com/cairn-io/cairn"
)

// MaxNodeID is the highest DRBD node id (DRBD 9 supports 32 nodes per resource).
const MaxNodeID = 31

// Range is an inclusive range of integers handed out by an allocator.
type Range struct {
	Min, Max int
}

// DefaultPorts and DefaultMinors are the ranges used when none is configured.
var (
	DefaultPorts  = Range{7000, 7999}
	DefaultMinors = Range{1000, 49999}
)

// Validate refuses an empty or inverted range; field names the flag or option.
func (r Range) Validate(field string, lo, hi int) error {
	if r.Min < lo || r.Max > hi || r.Min > r.Max {
		return fmt.Errorf("%s: range %d-%d must lie within %d-%d with min <= max", field, r.Min, r.Max, lo, hi)
	}
	return nil
}

func (r Range) String() string { return fmt.Sprintf("%d-%d", r.Min, r.Max) }

// NodeID returns the lowest DRBD node id not in used. Refuses with precondition_failed
// when all 32 are taken.
func NodeID(resource string, used []int) (int, error) {
	for id := 0; id <= MaxNodeID; id++ {
		if !slices.Contains(used, id) {
			return id, nil
		}
	}
	return 0, cairn.Errorf(cairn.CodePreconditionFailed, "resource %s has all %d DRBD node ids in use", resource, MaxNodeID+1)
}

// Pool is the state of an allocator as the views keep it: values at or above HighWater
// were never handed out; below it, Free lists (ascending) the ones given back.
type Pool struct {
	HighWater int
	Free      []int
}

// Lowest returns up to n values Take could hand out, lowest first (fewer when r runs
// out): the choices a caller that must skip some picks from.
func Lowest(p Pool, r Range, n int) []int {
	out := make([]int, 0, n)
	for _, v := range p.Free {
		if len(out) == n {
			return out
		}
		if v >= r.Min && v <= r.Max {
			out = append(out, v)
		}
	}
	for next := max(p.HighWater, r.Min); len(out) < n && next <= r.Max; next++ {
		out = append(out, next)
	}
	return out
}

// Take hands out n values from r: the lowest freed ones first, then fresh ones from the
// high-water mark, never a value outside r and never a wrap-around. what names the
// value ("port", "minor on node n1") in the precondition_failed refusal when r runs out.
func Take(p Pool, r Range, n int, what string) ([]int, error) {
	out := make([]int, 0, n)
	for _, v := range p.Free {
		if len(out) == n {
			break
		}
		if v >= r.Min && v <= r.Max {
			out = append(out, v)
		}
	}
	next := max(p.HighWater, r.Min)
	for len(out) < n && next <= r.Max {
		out = append(out, next)
		next++
	}
	if len(out) < n {
		return nil, cairn.Errorf(cairn.CodePreconditionFailed, "no free %s left in range %s (%d needed)", what, r, n).
			WithDetails(map[string]any{"range": r.String(), "needed": n})
	}
	return out, nil
}
