package mmp

import (
	"fmt"
	"slices"

	"github.com/cairn-io/cairn/storage/zfs"
)

// Refusal codes of the leaf identity rules (see Identify).
const (
	CodeLeafWithoutConfig = "leaf_without_config" // a leaf has no readable label config
	CodeDuplicateLeaf     = "duplicate_leaf"      // the same leaf (guid) given twice
	CodeLeafNotInPool     = "leaf_not_in_pool"    // a leaf the pool's current tree does not hold
	CodeIncompletePool    = "incomplete_pool"     // a top-level vdev has no leaf given
	CodeGUIDSumMismatch   = "guid_sum_mismatch"   // the trees do not add up to ub_guid_sum
)

// Identity is what the leaves given say about the pool they belong to.
type Identity struct {
	PoolGUID uint64
	PoolName string
	// Tops maps each top-level vdev id to the newest config read for it.
	Tops map[uint64]zfs.LabelConfig
	// Children is vdev_children of the newest config; Holes its hole count.
	Children uint64
	Holes    int
	// GUIDSum is pool_guid plus every top-level tree's guid sum, when every top-level
	// vdev is known (Complete).
	GUIDSum  uint64
	Complete bool
}

// Identify checks that the leaves read are the leaves of one pool and of all of it, the
// way OpenZFS only trusts uberblocks of the vdevs in the pool's config:
//
//   - every leaf has a readable label config (CodeLeafWithoutConfig): a leaf without one
//     cannot be told apart from a stray device, and its uberblocks must not compete for
//     the best one;
//   - all name one pool guid (CodeMixedPools), no leaf guid twice (CodeDuplicateLeaf);
//   - each leaf is in the newest vdev_tree of its top-level vdev (CodeLeafNotInPool: a
//     detached or replaced leaf whose old labels were not cleared);
//   - every top-level vdev (0 .. vdev_children-1, holes aside) has a leaf given
//     (CodeIncompletePool): a missing one could hold the newest uberblock;
//   - with every top-level known and no holes, pool_guid plus the trees' guid sums
//     equals the best uberblock's ub_guid_sum (CodeGUIDSumMismatch), as spa_load
//     compares vdev_guid_sum.
//
// best is the best uberblock over the leaves (nil: the sum is not compared). The error
// is a readError carrying the code.
func Identify(leaves []*zfs.Leaf, best *zfs.Uberblock) (Identity, error) {
	id := Identity{Tops: map[uint64]zfs.LabelConfig{}}
	var newest zfs.LabelConfig
	guids := map[uint64]string{}
	trees := map[uint64][]uint64{} // top-level id -> the guids of its newest tree
	var first string
	for _, lf := range leaves {
		c, l, ok := lf.Config(0)
		if !ok {
			return id, readError{code: CodeLeafWithoutConfig, msg: fmt.Sprintf("leaf %s has no readable label config: it cannot be identified as a leaf of the pool", lf.Name)}
		}
		if id.PoolGUID == 0 {
			id.PoolGUID, id.PoolName, first = c.PoolGUID, c.PoolName, lf.Name
		} else if c.PoolGUID != id.PoolGUID {
			return id, readError{code: CodeMixedPools, msg: fmt.Sprintf("leaf %s belongs to pool guid %d, leaf %s to pool guid %d: give the leaves of one pool",
				first, id.PoolGUID, lf.Name, c.PoolGUID)}
		}
		if other, dup := guids[c.GUID]; dup && c.GUID != 0 {
			return id, readError{code: CodeDuplicateLeaf, msg: fmt.Sprintf("leaves %s and %s are the same vdev (guid %d): give each leaf once", other, lf.Name, c.GUID)}
		}
		guids[c.GUID] = lf.Name
		if top, ok := id.Tops[c.TopID]; !ok || c.TXG > top.TXG {
			id.Tops[c.TopID] = c
			trees[c.TopID] = zfs.TreeGUIDs(lf.Labels[l].Config)
		}
		if c.TXG >= newest.TXG {
			newest = c
		}
	}
	for _, lf := range leaves {
		c, _, _ := lf.Config(0)
		top := id.Tops[c.TopID]
		if !slices.Contains(trees[c.TopID], c.GUID) {
			return id, readError{code: CodeLeafNotInPool, msg: fmt.Sprintf("leaf %s (guid %d) is not in the current tree of top-level vdev %d (config txg %d): a detached or replaced leaf",
				lf.Name, c.GUID, c.TopID, top.TXG)}
		}
	}
	id.Children, id.Holes = newest.VdevChildren, newest.Holes
	var missing []uint64
	for i := uint64(0); i < id.Children; i++ {
		if _, ok := id.Tops[i]; !ok {
			missing = append(missing, i)
		}
	}
	if len(missing) > id.Holes {
		return id, readError{code: CodeIncompletePool, msg: fmt.Sprintf("pool %q has %d top-level vdevs but no leaf was given for %v: give a leaf of every top-level vdev",
			id.PoolName, id.Children, missing[:len(missing)-id.Holes])}
	}
	id.Complete = len(missing) == 0 && id.Children > 0
	if id.Complete {
		id.GUIDSum = id.PoolGUID
		for _, c := range id.Tops {
			id.GUIDSum += c.TreeGUIDSum
		}
		if best != nil && best.GUIDSum != id.GUIDSum {
			return id, readError{code: CodeGUIDSumMismatch, msg: fmt.Sprintf("pool %q: the vdev trees in the labels add up to guid sum %d, the best uberblock (txg %d) says %d: the labels given are not the pool's current configuration",
				id.PoolName, id.GUIDSum, best.TXG, best.GUIDSum)}
		}
	}
	return id, nil
}
