package zpoolagent

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	metricDecisions = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "cairn_zpool_decisions_total",
		Help: "Decisions of the agent's pool workers, by action (import, adopt, export, fence, …; every pass of a worker ends with nothing or wait).",
	}, []string{"action"})
	metricChecks = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "cairn_zpool_checks_total",
		Help: "MMP activity checks run by the agent before an import, by verdict code (no_activity, activity_detected, exported_by_this_host, mmp_off, no_hostid, unreadable_vdev, canceled, …).",
	}, []string{"code"})
	metricCheckSeconds = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "cairn_zpool_check_duration_seconds",
		Help:    "Wall time of the agent's MMP activity checks (a check that is not needed takes milliseconds).",
		Buckets: []float64{0.01, 0.1, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120},
	})
	metricImports = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "cairn_zpool_imports_total",
		Help: "Import attempts after a grant, by outcome (imported, forced: imported with -f, refused, failed) and code.",
	}, []string{"outcome", "code"})
	metricExports = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "cairn_zpool_exports_total",
		Help: "Exports of a pool whose grant moved or ended, by outcome (ok, failed).",
	}, []string{"outcome"})
	metricSuspensions = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "cairn_zpool_suspensions_total",
		Help: "Imported pools found suspended by the kernel, by code (mmp_suspended: ZFS-8000-MM, io_suspended).",
	}, []string{"code"})
	metricFences = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "cairn_zpool_fences_total",
		Help: "Pools fenced (zpool export -F) after the watcher saw another host write them, by outcome (ok, failed).",
	}, []string{"outcome"})
	metricAlarms = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "cairn_zpool_contests_total",
		Help: "Foreign writes seen by the watcher after import, by observation code (foreign_hostid, txg_fork, sync_slot_rewound, config_behind).",
	}, []string{"code"})
	metricPolls = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "cairn_zpool_watch_polls_total",
		Help: "Watcher polls of imported pools, by observation code (quiet, own_writes, foreign_hostid, txg_fork, sync_slot_rewound, config_behind, error).",
	}, []string{"code"})
	metricImported = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cairn_zpool_imported",
		Help: "1 while the agent holds the pool imported and watched, else 0.",
	}, []string{"pool"})
)
