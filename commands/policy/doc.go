// Package policy holds the control plane's reactions: what turns agents' observations
// (heartbeats, pool, storage-pool and DRBD status folded by projections) into commands,
// the last step of the walk cmd → admission → events → projector → views → dispatcher →
// agents → status → policies.
//
//   - Watchdog: missed heartbeats → node.set-state offline, and back (DecideLiveness is
//     the pure rule).
//   - ContestPools / RecontestPools: a contested pool report → pool.contest
//     (ContestFromStatus is the pure rule).
//   - RecordCapacity: a storage-pool report that is news → sp.capacity-report
//     (CapacityFromReport).
//   - SnapshotAdvancer: replicas' snapshot reports → rd.snapshot-progress and the
//     clone's rd.restore, a clone whose snapshot failed at the bound started again
//     (SnapshotProgressFrom).
//   - BackupRecorder: the uploading node's report → backup.finish (BackupFinishFrom).
//   - Scheduler: backup schedules due → rd.snapshot, then backup.create; retention →
//     rd.snapshot-delete and backup.delete (DecideRun, Retention).
//
// Every policy submits through admission.Admission, so its commands are validated like
// an operator's, and acts only while the serve holds the side-effect lease (the Gate or
// leading function serve passes); the pure rules take views and return requests, and
// their command ids make two serves, or a report folded twice, record a decision once.
package policy
