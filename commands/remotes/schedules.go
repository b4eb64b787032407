package remotes

import (
	"github.com/robfig/cron/v3"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// ScheduleEnable is the body of backup.schedule-enable and backup.schedule-disable.
type ScheduleEnable = events.RemoteScheduleEnabled

// ParseCron parses a standard 5-field cron expression (minute hour day-of-month month
// day-of-week, UTC; descriptors such as @daily too), as schedules hold them.
func ParseCron(expr string) (cron.Schedule, error) {
	return cron.ParseStandard(expr)
}

// scheduleHandlers decide the schedule verbs: schedule.create and schedule.delete on the
// schedule's subject, backup.schedule-enable and -disable on the remote's (reading the
// schedule's and the target's subjects too).
func scheduleHandlers() []decide.Handler {
	return []decide.Handler{
		{Verb: "schedule.create", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c events.ScheduleCreated
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, names.Event("schedule", c.Name)) })
			if err != nil {
				return d, err
			}
			if _, ok, err := v.Schedule(c.Name); err != nil || ok {
				if err == nil {
					err = cairn.Errorf(cairn.CodeAlreadyExists, "schedule %s already exists", c.Name).About(cairn.ObjSchedule)
				}
				return d, err
			}
			if err := checkSchedule(&c); err != nil {
				return d, err
			}
			return d.With(names.Event("schedule", c.Name), &c, nil), nil
		}},
		{Verb: "schedule.modify", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c ScheduleModify
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, names.Event("schedule", c.Name)) })
			if err != nil {
				return d, err
			}
			cur, ok, err := v.Schedule(c.Name)
			if err != nil || !ok {
				if err == nil {
					err = cairn.Errorf(cairn.CodeNotFound, "schedule %s does not exist", c.Name).About(cairn.ObjSchedule)
				}
				return d, err
			}
			ev, warnings, err := DecideScheduleModify(cur.ScheduleCreated, c)
			if err != nil || ev == nil {
				return d.With("", nil, warnings), err
			}
			return d.With(names.Event("schedule", c.Name), ev, nil), nil
		}},
		{Verb: "schedule.delete", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c events.ScheduleDeleted
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, names.Event("schedule", c.Name)) })
			if err != nil {
				return d, err
			}
			if _, ok, err := v.Schedule(c.Name); err != nil || !ok {
				if err == nil {
					err = cairn.Errorf(cairn.CodeNotFound, "schedule %s does not exist", c.Name).About(cairn.ObjSchedule)
				}
				return d, err
			}
			// Not a read to check: an enablement reads the schedule's subject, so one
			// admitted meanwhile conflicts with this decision.
			all, err := v.Unchecked().ScheduleEnablements("")
			if err != nil {
				return d, err
			}
			for _, e := range all {
				if e.Schedule == c.Name {
					return d, cairn.Errorf(cairn.CodePreconditionFailed, "schedule %s is enabled on remote %s for %s; disable it first (backup.schedule-disable)", c.Name, e.Remote, target(e.RemoteScheduleEnabled))
				}
			}
			return d.With(names.Event("schedule", c.Name), &c, nil), nil
		}},
		{Verb: "backup.schedule-enable", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			return decideEnablement(v, names, body, true)
		}},
		{Verb: "backup.schedule-disable", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			return decideEnablement(v, names, body, false)
		}},
	}
}

// ScheduleModify is the body of schedule.modify: the fields given change (IncCron ""
// removes the incremental backups).
type ScheduleModify struct {
	Name       string  `json:"name"`
	FullCron   *string `json:"full_cron"`
	IncCron    *string `json:"inc_cron"`
	KeepLocal  *int    `json:"keep_local"`
	KeepRemote *int    `json:"keep_remote"`
	OnFailure  *string `json:"on_failure"`
	MaxRetries *int    `json:"max_retries"`
}

// checkSchedule refuses (invalid_argument naming the field) a cron expression that does
// not parse, and max_retries without on_failure retry; OnFailure "" becomes "skip".
func checkSchedule(c *events.ScheduleCreated) error {
	if _, err := ParseCron(c.FullCron); err != nil {
		return cairn.InvalidField("full_cron", "%q is not a cron expression (minute hour day month weekday, UTC): %v", c.FullCron, err)
	}
	if c.IncCron != "" {
		if _, err := ParseCron(c.IncCron); err != nil {
			return cairn.InvalidField("inc_cron", "%q is not a cron expression (minute hour day month weekday, UTC): %v", c.IncCron, err)
		}
	}
	if c.OnFailure == "" {
		c.OnFailure = "skip"
	}
	if c.MaxRetries > 0 && c.OnFailure != "retry" {
		return cairn.InvalidField("max_retries", "only with on_failure retry")
	}
	return nil
}

// DecideScheduleModify applies the fields c gives to schedule cur: the event carries
// the whole schedule as it becomes. Refuses what schedule.create refuses; the same
// schedule again is a no-op with a warning. Runs follow the new crons from the next
// check on; snapshots and backups already made stay.
func DecideScheduleModify(cur events.ScheduleCreated, c ScheduleModify) (*events.ScheduleModified, []string, error) {
	next := cur
	set := func(dst *string, src *string) {
		if src != nil {
			*dst = *src
		}
	}
	setInt := func(dst *int, src *int) {
		if src != nil {
			*dst = *src
		}
	}
	set(&next.FullCron, c.FullCron)
	set(&next.IncCron, c.IncCron)
	set(&next.OnFailure, c.OnFailure)
	setInt(&next.KeepLocal, c.KeepLocal)
	setInt(&next.KeepRemote, c.KeepRemote)
	setInt(&next.MaxRetries, c.MaxRetries)
	if c.OnFailure != nil && *c.OnFailure == "skip" && c.MaxRetries == nil {
		next.MaxRetries = 0 // retries belong to on_failure retry
	}
	if err := checkSchedule(&next); err != nil {
		return nil, nil, err
	}
	if next == cur {
		return nil, []string{"schedule " + cur.Name + " already is so; nothing changed"}, nil
	}
	ev := events.ScheduleModified(next)
	return &ev, nil, nil
}

func target(e events.RemoteScheduleEnabled) string {
	if e.Group != "" {
		return "resource group " + e.Group
	}
	return "resource definition " + e.Resource
}

// decideEnablement enables (or disables) a schedule on a remote for a definition or a
// group. Refuses invalid_argument (neither or both of resource and group), not_found
// (remote, schedule, definition, group), already_exists (enabled already) and not_found
// for a disable of what is not enabled.
func decideEnablement(v *projections.View, names events.Names, body []byte, enable bool) (decide.Decision, error) {
	var c ScheduleEnable
	if err := decide.DecodeBody(body, &c); err != nil {
		return decide.Decision{}, err
	}
	r := decide.NewReads(v, names)
	d, err := func() (decide.Decision, error) {
		if (c.Resource == "") == (c.Group == "") {
			return decide.Decision{}, cairn.InvalidField("resource", "give one of resource and group")
		}
		for _, s := range []string{names.Event("remote", c.Remote), names.Event("schedule", c.Schedule)} {
			if err := r.Subject(s); err != nil {
				return decide.Decision{}, err
			}
		}
		if err := exists(v, c.Remote); err != nil {
			return decide.Decision{}, err
		}
		if _, ok, err := v.Schedule(c.Schedule); err != nil || !ok {
			if err == nil {
				err = cairn.Errorf(cairn.CodeNotFound, "schedule %s does not exist", c.Schedule).About(cairn.ObjSchedule)
			}
			return decide.Decision{}, err
		}
		on, err := v.ScheduleEnabledFor(c.Remote, c.Schedule, c.Resource, c.Group)
		if err != nil {
			return decide.Decision{}, err
		}
		if !enable {
			if !on {
				return decide.Decision{}, cairn.Errorf(cairn.CodeNotFound, "schedule %s is not enabled on remote %s for %s", c.Schedule, c.Remote, target(c)).About(cairn.ObjSchedule)
			}
			e := events.RemoteScheduleDisabled(c)
			return decide.Decision{}.With(names.Event("remote", c.Remote), &e, nil), nil
		}
		if on {
			return decide.Decision{}, cairn.Errorf(cairn.CodeAlreadyExists, "schedule %s is enabled on remote %s for %s already", c.Schedule, c.Remote, target(c)).About(cairn.ObjSchedule)
		}
		if c.Group != "" {
			if err := r.Subject(names.Event("rg", c.Group)); err != nil {
				return decide.Decision{}, err
			}
			if _, ok, err := v.ResourceGroup(c.Group); err != nil || !ok {
				if err == nil {
					err = cairn.Errorf(cairn.CodeNotFound, "resource group %s does not exist", c.Group).About(cairn.ObjResourceGroup)
				}
				return decide.Decision{}, err
			}
		} else {
			if err := r.Subject(names.Event("rd", c.Resource)); err != nil {
				return decide.Decision{}, err
			}
			if _, ok, err := v.ResourceDefinition(c.Resource); err != nil || !ok {
				if err == nil {
					err = cairn.Errorf(cairn.CodeNotFound, "resource definition %s does not exist", c.Resource).About(cairn.ObjResourceDefinition)
				}
				return decide.Decision{}, err
			}
		}
		return decide.Decision{}.With(names.Event("remote", c.Remote), &c, nil), nil
	}()
	return r.Decide(d), err
}
