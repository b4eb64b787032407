package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/test/testtools"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// browser starts a headless Chromium (the real browser, Debian's package, which .ci/run
// installs) and returns a context for chromedp actions; JavaScript errors and console
// errors of the page are collected in *errs.
func browser(t *testing.T) (context.Context, *[]string) {
	t.Helper()
	bin := testtools.Path(t, "chromium")
	// The profile is not a t.TempDir: Chromium's helper processes may still write to it
	// for a moment after the browser is closed, and TempDir's removal then fails the
	// test ("directory not empty"); it is removed below, after the browser, retrying.
	profile, err := os.MkdirTemp("", "cairn-chromium-")
	require.NoError(t, err)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.Headless,
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1600, 1200), chromedp.UserDataDir(profile))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	errs := &[]string{}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			*errs = append(*errs, e.ExceptionDetails.Error())
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value))
				}
				*errs = append(*errs, "console: "+strings.Join(parts, " "))
			}
		}
	})
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx) // closes the browser and waits for it
		cancel()
		acancel()
		for range 50 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("Chromium's profile %s could not be removed", profile)
	})
	// The browser starts on the first Run of this context, and lives as long as it: the
	// timeouts of later Runs (inBrowser) must not end it.
	require.NoError(t, chromedp.Run(ctx))
	return ctx, errs
}

// shot saves a screenshot of the page as a test artifact: into $CAIRN_ARTIFACTS when
// set (docs/img holds the ones docs/dashboard.md shows), else the test's temporary
// directory.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("CAIRN_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	var png []byte
	inBrowser(t, ctx, 10*time.Second, chromedp.FullScreenshot(&png, 100))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
}

// run runs chromedp actions with a deadline.
func inBrowser(t *testing.T, ctx context.Context, timeout time.Duration, actions ...chromedp.Action) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := chromedp.Run(tctx, actions...); err != nil {
		var html string
		_ = chromedp.Run(ctx, chromedp.OuterHTML("body", &html))
		t.Fatalf("in the browser: %v\npage:\n%s", err, html)
	}
}

// The dashboard (issue 30) in a real browser, against `cairn serve` with three sim
// agents: the overview shows every node with its state and the cluster's health; a
// node added meanwhile appears without a reload (the page follows the event stream);
// the resources page shows each replica's disk state as its agent reports it and finds
// a definition by name; the Cordon button sends node.modify (the view then says
// cordoned); the history lists events filtered by type. No JavaScript error.
func TestDashboardInARealBrowser(t *testing.T) {
	ctx, errs := browser(t)
	c := startSimCluster(t, 3, "--heartbeat-timeout", "2s")
	c.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	c.cmd("rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`)
	c.cmd("rg.spawn", `{"resource_group":"rg2","name":"other","size_kib":4096}`)
	c.waitUpToDate("r1", 2, 60*time.Second)

	var nodes, health string
	inBrowser(t, ctx, 30*time.Second,
		chromedp.Navigate(c.s.url("/ui/")),
		chromedp.WaitVisible(`#nodes tr[data-node="n3"]`),
		chromedp.Text(`#nodes`, &nodes),
		chromedp.Text(`#health-status`, &health))
	for _, n := range []string{"n1", "n2", "n3"} {
		assert.Contains(t, nodes, n)
	}
	assert.Contains(t, nodes, "online")
	assert.Equal(t, "ok", health)

	// Live: a node added now shows up without a reload.
	c.cmd("node.add", `{"name":"n9","host":"h9","address":"10.0.0.9"}`)
	inBrowser(t, ctx, 15*time.Second, chromedp.WaitVisible(`#nodes tr[data-node="n9"]`))

	// Cordon n3 from the page.
	inBrowser(t, ctx, 15*time.Second,
		chromedp.Click(`#nodes tr[data-node="n3"] button[data-action="cordon"]`),
		chromedp.WaitVisible(`#nodes tr[data-node="n3"] .flag`))
	var flag string
	inBrowser(t, ctx, 5*time.Second, chromedp.Text(`#nodes tr[data-node="n3"] .flag`, &flag))
	assert.Equal(t, "cordoned", flag)
	code, body := httpJSON(t, "GET", c.s.url("/cairn/v1/nodes/n3"), "")
	require.Equal(t, 200, code)
	assert.Contains(t, body, `"AutoplaceTarget":"false"`, "the button did not send node.modify")
	out, code := run(t, "audit", "--nats", c.s.natsURL(), "--type", "node.properties-changed", "--json")
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"name":"n3"`)

	shot(t, ctx, "dashboard-overview.png")

	// An agent killed: its node shows offline within seconds (the watchdog's event).
	c.kill("n2")
	inBrowser(t, ctx, 15*time.Second, chromedp.WaitVisible(`#nodes tr[data-node="n2"] td.state-offline`))

	// Policies as a picture: n2's eviction counts down, live, with its bar.
	var plan, left1, left2 string
	inBrowser(t, ctx, 20*time.Second,
		chromedp.Navigate(c.s.url("/ui/#/policies")),
		chromedp.WaitVisible(`#evictions tr[data-node="n2"] .countdown`),
		chromedp.Text(`#evictions tr[data-node="n2"]`, &plan),
		chromedp.AttributeValue(`#evictions tr[data-node="n2"] .countdown`, "data-left", &left1, nil))
	assert.Contains(t, plan, "in 60 min", "evicted after the default hour offline")
	time.Sleep(2500 * time.Millisecond) // the countdown ticks every second by itself
	inBrowser(t, ctx, 10*time.Second, chromedp.AttributeValue(`#evictions tr[data-node="n2"] .countdown`, "data-left", &left2, nil))
	l1, err1 := strconv.Atoi(left1)
	l2, err2 := strconv.Atoi(left2)
	require.NoError(t, err1)
	require.NoError(t, err2)
	assert.Less(t, l2, l1, "the countdown does not move")
	assert.Greater(t, l1, 3500)
	shot(t, ctx, "dashboard-policies.png")

	// A contested pool's latch, with the grant it holds back.
	c.cmd("pool.create", `{"name":"tank","devices":["/dev/sdb"],"nodes":["n1","n3"]}`)
	c.cmd("pool.import", `{"pool":"tank","node":"n1"}`)
	c.cmd("pool.contest", `{"pool":"tank","node":"n1","reason":"hostid 0x2 wrote while n1 held it"}`)
	var latch, href string
	inBrowser(t, ctx, 20*time.Second,
		chromedp.Navigate(c.s.url("/ui/#/pools")),
		chromedp.WaitVisible(`[data-latch="tank"]`),
		chromedp.Text(`[data-latch="tank"]`, &latch),
		chromedp.AttributeValue(`[data-latch="tank"] a`, "href", &href, nil))
	assert.Contains(t, latch, "hostid 0x2 wrote while n1 held it")
	assert.Contains(t, latch, "pool.export")
	assert.Regexp(t, `^#/at\?seq=[1-9][0-9]*$`, href, "the grant's event")
	shot(t, ctx, "dashboard-pools.png")

	// Resources: replica states, and the search.
	var row string
	inBrowser(t, ctx, 20*time.Second,
		chromedp.Navigate(c.s.url("/ui/#/resources")),
		chromedp.WaitVisible(`#resources tr[data-resource="r1"]`),
		chromedp.Text(`#resources tr[data-resource="r1"]`, &row))
	assert.Contains(t, row, "UpToDate")
	shot(t, ctx, "dashboard-resources.png")
	var found string
	inBrowser(t, ctx, 20*time.Second,
		chromedp.SendKeys(`#search`, "oth\n"),
		chromedp.WaitNotPresent(`#resources tr[data-resource="r1"]`),
		chromedp.Text(`#resources`, &found))
	assert.Contains(t, found, "other")

	// History, filtered by type.
	var hist string
	inBrowser(t, ctx, 20*time.Second,
		chromedp.Navigate(c.s.url("/ui/#/history?type=node.added")),
		chromedp.WaitVisible(`#history tbody tr`),
		chromedp.Text(`#history`, &hist))
	assert.Contains(t, hist, "node.added")
	assert.Contains(t, hist, "cairn.ev.node.n9")
	assert.NotContains(t, hist, "rd.created")

	// The cluster as it was after n9's node.added, from the history's link, and what
	// changed since (n3 cordoned afterwards).
	var seq, then, since string
	inBrowser(t, ctx, 20*time.Second,
		chromedp.Text(`#history tr:first-child td:first-child`, &seq),
		chromedp.Click(`#history tr:first-child td:first-child a`),
		chromedp.WaitVisible(`#at-nodes`),
		chromedp.Text(`#at-nodes`, &then),
		chromedp.Text(`#at-diff`, &since))
	assert.Contains(t, then, "n9")
	assert.Contains(t, since, "n3")
	assert.Contains(t, since, "changed since")
	assert.NotEmpty(t, seq)

	// Two past moments compared: from n9's node.added back to the event before it, n9 is
	// the one difference (removed); nothing of what came later shows.
	n, err := strconv.Atoi(strings.TrimSpace(seq))
	require.NoError(t, err)
	var title, between string
	inBrowser(t, ctx, 20*time.Second,
		chromedp.SetValue(`#at-with`, strconv.Itoa(n-1)),
		chromedp.Click(`#at-compare`),
		chromedp.WaitVisible(`#at-diff tr[data-change="nodes/n9"]`),
		chromedp.Text(`#at-diff-title`, &title),
		chromedp.Text(`#at-diff`, &between))
	assert.Equal(t, fmt.Sprintf("From event %d to event %d", n, n-1), title)
	assert.Contains(t, between, "removed")
	assert.NotContains(t, between, "n3", "a change after both moments")
	shot(t, ctx, "dashboard-compare.png")
	assert.Empty(t, *errs, "JavaScript errors")
}

// With --http-auth the dashboard asks for a token; a viewer's sees the cluster and no
// command button, an operator's sees them.
func TestDashboardSignInAndRoles(t *testing.T) {
	s := startServe(t, t.TempDir(), "--http-auth")
	_, code := run(t, "cmd", "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`, "--nats", s.natsURL())
	require.Equal(t, 0, code)
	_, code = run(t, "cmd", "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`, "--nats", s.natsURL())
	require.Equal(t, 0, code)
	mint := func(name, role string) string {
		out, errb, code := runAll(t, "auth", "token", "create", name, "--role", role, "--nats", s.natsURL())
		require.Equal(t, 0, code, errb)
		return strings.TrimSpace(out)
	}
	viewer, operator := mint("watcher", "viewer"), mint("ops", "operator")
	for _, tc := range []struct {
		token   string
		who     string
		buttons bool
	}{{viewer, "watcher (viewer)", false}, {operator, "ops (operator)", true}} {
		ctx, errs := browser(t)
		var who string
		var buttons int
		inBrowser(t, ctx, 30*time.Second,
			chromedp.Navigate(s.url("/ui/")),
			chromedp.WaitVisible(`#login-form`),
			chromedp.SendKeys(`#token`, tc.token),
			chromedp.Click(`#login-form button[type="submit"]`),
			chromedp.WaitVisible(`#nodes tr[data-node="n1"]`),
			chromedp.Text(`#who`, &who),
			chromedp.Evaluate(`document.querySelectorAll("button[data-action]").length`, &buttons))
		assert.Equal(t, tc.who, who)
		assert.Equal(t, tc.buttons, buttons > 0, fmt.Sprintf("%s: %d command buttons", tc.who, buttons))
		assert.Empty(t, *errs, "JavaScript errors")
	}
}
