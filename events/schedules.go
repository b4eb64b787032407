package events

// Backup schedules (cairn.ev.schedule.<name>) and where they are enabled (on the
// remote's subject): the lease holder's scheduler takes a snapshot and backs it up when
// a schedule's cron says so (docs/backups.md "Schedules").

// ScheduleCreated: a backup schedule. FullCron and IncCron are standard 5-field cron
// expressions (UTC): a full backup at every FullCron time, an incremental one at every
// IncCron time in between (none when empty). KeepLocal is how many of the schedule's
// snapshots each definition keeps (0: all), KeepRemote how many full backups with their
// incrementals each keeps on the remote (0: all). OnFailure "retry" tries a failed run
// again at the next check, up to MaxRetries times; "skip" waits for the next time.
type ScheduleCreated struct {
	Name       string `json:"name"`
	FullCron   string `json:"full_cron"`
	IncCron    string `json:"inc_cron,omitempty"`
	KeepLocal  int    `json:"keep_local,omitempty"`
	KeepRemote int    `json:"keep_remote,omitempty"`
	OnFailure  string `json:"on_failure,omitempty"`
	MaxRetries int    `json:"max_retries,omitempty"`
}

// ScheduleModified: a schedule changed; it carries the whole schedule as it is now.
type ScheduleModified ScheduleCreated

// ScheduleDeleted: a schedule is gone (it was enabled nowhere).
type ScheduleDeleted struct {
	Name string `json:"name"`
}

// RemoteScheduleEnabled: schedule Schedule backs up to Remote every definition of
// Group, or definition Resource (one of them is set).
type RemoteScheduleEnabled struct {
	Remote   string `json:"remote"`
	Schedule string `json:"schedule"`
	Resource string `json:"resource,omitempty"`
	Group    string `json:"group,omitempty"`
}

// RemoteScheduleDisabled: that enablement is gone.
type RemoteScheduleDisabled struct {
	Remote   string `json:"remote"`
	Schedule string `json:"schedule"`
	Resource string `json:"resource,omitempty"`
	Group    string `json:"group,omitempty"`
}

func (*ScheduleCreated) EventType() string        { return "schedule.created" }
func (*ScheduleModified) EventType() string       { return "schedule.modified" }
func (*ScheduleDeleted) EventType() string        { return "schedule.deleted" }
func (*RemoteScheduleEnabled) EventType() string  { return "remote.schedule-enabled" }
func (*RemoteScheduleDisabled) EventType() string { return "remote.schedule-disabled" }

func init() {
	Register(Type{Name: "schedule.created", Version: 1, New: func() Payload { return new(ScheduleCreated) }})
	Register(Type{Name: "schedule.modified", Version: 1, New: func() Payload { return new(ScheduleModified) }})
	Register(Type{Name: "schedule.deleted", Version: 1, New: func() Payload { return new(ScheduleDeleted) }})
	Register(Type{Name: "remote.schedule-enabled", Version: 1, New: func() Payload { return new(RemoteScheduleEnabled) }})
	Register(Type{Name: "remote.schedule-disabled", Version: 1, New: func() Payload { return new(RemoteScheduleDisabled) }})
}
