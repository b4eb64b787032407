package zfs

import "syscall"

// oDirect is O_DIRECT: reads bypass the page cache.
const oDirect = syscall.O_DIRECT
