//go:build !linux

package zfs

// oDirect is 0 where O_DIRECT does not exist: reads are buffered.
const oDirect = 0
