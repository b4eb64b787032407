package lease_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server/lease"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func startNATS(t *testing.T) string {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true})
	require.NoError(t, err)
	go ns.Start()
	require.True(t, ns.ReadyForConnections(10*time.Second))
	t.Cleanup(ns.Shutdown)
	return ns.ClientURL()
}

type member struct {
	l      *lease.Lease
	nc     *nats.Conn
	cancel context.CancelFunc
	done   chan struct{}
}

func join(t *testing.T, url, holder string, ttl time.Duration) *member {
	t.Helper()
	return joinWith(t, url, holder, ttl, nil)
}

func joinWith(t *testing.T, url, holder string, ttl time.Duration, eligible func() error) *member {
	t.Helper()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	l := lease.New(js, lease.Options{Bucket: "TEST_LEASE", Holder: holder, TTL: ttl, Log: zerolog.Nop(), Eligible: eligible})
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{l: l, nc: nc, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(m.done); _ = l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-m.done })
	return m
}

// sampler checks, every 2 ms, that at most one member may act, and remembers who did.
type sampler struct {
	mu      sync.Mutex
	members map[string]*member
	both    atomic.Int64
	leader  atomic.Value // string
	stop    chan struct{}
	wg      sync.WaitGroup
}

func sample(members map[string]*member) *sampler {
	s := &sampler{stop: make(chan struct{}), members: members}
	s.leader.Store("")
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			select {
			case <-s.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			who := ""
			n := 0
			s.mu.Lock()
			for name, m := range s.members {
				if _, ok := m.l.Leading(); ok {
					n++
					who = name
				}
			}
			s.mu.Unlock()
			if n > 1 {
				s.both.Add(1)
			}
			if who != "" {
				s.leader.Store(who)
			}
		}
	}()
	return s
}

func (s *sampler) close() { close(s.stop); s.wg.Wait() }

func (s *sampler) add(name string, m *member) {
	s.mu.Lock()
	s.members[name] = m
	s.mu.Unlock()
}

// TestOneLeaderAndFailover: two serves campaign; exactly one leads at any sampled moment;
// when the leader dies without releasing (its connection gone) the other takes over
// within the TTL plus a renewal period, with a higher fencing token; a clean stop
// releases at once.
func TestOneLeaderAndFailover(t *testing.T) {
	url := startNATS(t)
	const ttl = time.Second
	ms := map[string]*member{"a": join(t, url, "a", ttl), "b": join(t, url, "b", ttl)}
	smp := sample(ms)
	defer smp.close()
	require.Eventually(t, func() bool { return smp.leader.Load().(string) != "" }, 5*time.Second, 5*time.Millisecond)
	first := smp.leader.Load().(string)
	other := map[string]string{"a": "b", "b": "a"}[first]
	token1, _ := ms[first].l.Leading()
	require.Eventually(t, func() bool { return ms[other].l.Info().Holder == first }, 5*time.Second, 5*time.Millisecond,
		"the other serve sees who leads (at its next campaign)")
	assert.False(t, ms[other].l.Info().This)

	// The leader dies: its connection is gone, nothing releases the lease.
	died := time.Now()
	ms[first].nc.Close()
	require.Eventually(t, func() bool { _, ok := ms[other].l.Leading(); return ok }, 5*time.Second, 5*time.Millisecond)
	took := time.Since(died)
	assert.Less(t, took, ttl+ttl/2, "failover within the TTL plus a renewal period")
	token2, _ := ms[other].l.Leading()
	assert.Greater(t, token2, token1, "a new fencing token")
	_, ok := ms[first].l.Leading()
	assert.False(t, ok, "the dead leader does not act")
	t.Logf("failover after the leader's death: %s (TTL %s)", took.Round(time.Millisecond), ttl)

	// A third joins; the leader stops cleanly: released, taken over at once.
	c := join(t, url, "c", ttl)
	smp.add("c", c)
	time.Sleep(ttl / 2)
	stopped := time.Now()
	ms[other].cancel()
	<-ms[other].done
	require.Eventually(t, func() bool { _, ok := c.l.Leading(); return ok }, 5*time.Second, 5*time.Millisecond)
	assert.Less(t, time.Since(stopped), ttl/2+100*time.Millisecond, "a released lease is taken at the next campaign")
	assert.Zero(t, smp.both.Load(), "two members could act at the same moment")
}

// TestWhileRunsAPartOnlyUnderTheLease: the part starts when the lease is taken and its
// context ends when it is lost.
func TestWhileRunsAPartOnlyUnderTheLease(t *testing.T) {
	url := startNATS(t)
	m := join(t, url, "a", time.Second)
	var running atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.l.While(ctx, "part", func(pctx context.Context) {
		running.Add(1)
		<-pctx.Done()
		running.Add(-1)
	})
	require.Eventually(t, func() bool { return running.Load() == 1 }, 5*time.Second, 5*time.Millisecond)
	m.nc.Close() // renewals fail: the lease is lost
	require.Eventually(t, func() bool { return running.Load() == 0 }, 5*time.Second, 5*time.Millisecond)
}

// A serve started with another TTL than the running holder's refuses to run, naming
// both values, and leaves the bucket's TTL alone (on the old code it rewrote the
// bucket's MaxAge under the holder, and two serves acted at once).
func TestMixedTTLsAreRefused(t *testing.T) {
	url := startNATS(t)
	a := join(t, url, "a", time.Second)
	require.Eventually(t, func() bool { _, ok := a.l.Leading(); return ok }, 5*time.Second, 5*time.Millisecond)
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	b := lease.New(js, lease.Options{Bucket: "TEST_LEASE", Holder: "b", TTL: 400 * time.Millisecond, Log: zerolog.Nop()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = b.Run(ctx)
	require.ErrorIs(t, err, lease.ErrTTLMismatch)
	assert.Contains(t, err.Error(), "TTL 1s")
	assert.Contains(t, err.Error(), "--lease-ttl is 400ms")
	kv, err := js.KeyValue(ctx, "TEST_LEASE")
	require.NoError(t, err)
	st, err := kv.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, time.Second, st.TTL(), "the bucket's TTL was changed")
	_, ok := a.l.Leading()
	assert.True(t, ok)

	// SetTTL refuses while a serve holds the lease, and changes it once none does.
	require.ErrorContains(t, lease.SetTTL(ctx, js, "TEST_LEASE", 400*time.Millisecond, 1), "serve a holds the lease")
	a.cancel()
	<-a.done
	require.NoError(t, lease.SetTTL(ctx, js, "TEST_LEASE", 400*time.Millisecond, 1))
	require.NoError(t, b.Prepare(ctx))
}

// The embedded server's serve (TakeOverOwn: no other serve can share its bucket) changes
// the TTL itself, even over its own crashed run's lease.
func TestOwnBucketTakesTheNewTTL(t *testing.T) {
	url := startNATS(t)
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "TEST_LEASE", History: 1, TTL: time.Minute})
	require.NoError(t, err)
	_, err = kv.Create(ctx, lease.Key, []byte("me 1"))
	require.NoError(t, err)
	l := lease.New(js, lease.Options{Bucket: "TEST_LEASE", Holder: "me", TTL: time.Second, TakeOverOwn: true, Log: zerolog.Nop()})
	require.NoError(t, l.Prepare(ctx))
	st, err := kv.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, time.Second, st.TTL())
}

// A holder whose renewal comes late stops acting (Leading is false past TTL/2 after the
// start of its last renewal) but keeps the lease: the next renewal, a compare-and-set on
// its own last revision, makes it act again with the same fencing token. On the old
// code one late renewal gave the lease up, and the serve waited out the TTL for a new
// token.
func TestALateRenewalDoesNotGiveTheLeaseUp(t *testing.T) {
	const ttl = 2 * time.Second
	l, skew := skewedHolder(t, ttl)
	token, _ := l.Leading()
	skew.Store(int64(ttl)) // as if the renewals had stalled for a TTL
	_, ok := l.Leading()
	assert.False(t, ok, "a holder past its validity acts")
	skew.Store(0)
	require.Eventually(t, func() bool { tk, ok := l.Leading(); return ok && tk == token }, ttl/2, 5*time.Millisecond,
		"the next renewal did not make the holder act again with its token")
}

// The holder checks the clock assumption it rests on: when the bucket's stream leader's
// wall clock moves further between two renewals than the holder's own clock (here the
// holder's clock is set back 1.5 s, which looks the same from the holder: the server's
// clock stepped forward against it), the step is reported in Info (GET
// /cairn/v1/leader's clock_step_ms) and the metric.
func TestLeaseReportsAClockStep(t *testing.T) {
	l, skew := skewedHolder(t, 2*time.Second)
	time.Sleep(time.Second) // a few renewals without a step
	assert.Zero(t, l.Info().ClockStepMS, "a step reported while the clocks agree")
	skew.Store(int64(-1500 * time.Millisecond))
	require.Eventually(t, func() bool { return l.Info().ClockStepMS >= 1400 }, 3*time.Second, 10*time.Millisecond)
	assert.Less(t, l.Info().ClockStepMS, int64(1700))
}

// skewedHolder runs a lease holder on an embedded server whose clock runs skew ahead of
// time.Now, and waits until it leads.
func skewedHolder(t *testing.T, ttl time.Duration) (*lease.Lease, *atomic.Int64) {
	t.Helper()
	url := startNATS(t)
	skew := new(atomic.Int64)
	clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	l := lease.New(js, lease.Options{Bucket: "TEST_LEASE", Holder: "a", TTL: ttl, Now: clock, Log: zerolog.Nop()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool { _, ok := l.Leading(); return ok }, 5*time.Second, 5*time.Millisecond)
	return l, skew
}

// A holder that becomes ineligible (its views stopped at an event of a newer cairn)
// stops acting at once and releases the lease at its next step; the eligible serve takes
// over well before the TTL would have let it, and the ineligible one does not campaign
// while it stays so. Once eligible again it may lead again (after the other releases).
func TestIneligibleHolderStepsAside(t *testing.T) {
	url := startNATS(t)
	ttl := 2 * time.Second
	var why atomic.Pointer[error]
	old := joinWith(t, url, "old", ttl, func() error {
		if e := why.Load(); e != nil {
			return *e
		}
		return nil
	})
	require.Eventually(t, func() bool { _, ok := old.l.Leading(); return ok }, 5*time.Second, 5*time.Millisecond)
	upgraded := join(t, url, "new", ttl)

	stopped := errors.New("the views stopped at an event of a newer cairn")
	began := time.Now()
	why.Store(&stopped)
	_, acting := old.l.Leading()
	assert.False(t, acting, "an ineligible holder still acts")
	require.Eventually(t, func() bool { _, ok := upgraded.l.Leading(); return ok }, 5*time.Second, 5*time.Millisecond)
	took := time.Since(began)
	assert.Less(t, took, ttl, "the other serve waited for the lease to expire instead of a release")
	t.Logf("taken over %s after the holder became ineligible (TTL %s)", took.Round(time.Millisecond), ttl)
	require.Eventually(t, func() bool { return old.l.Info().Holder == "new" }, 5*time.Second, 5*time.Millisecond,
		"the serve that stepped aside does not show who holds the lease")

	// While ineligible it does not take a free lease.
	upgraded.cancel()
	<-upgraded.done
	time.Sleep(ttl) // several campaign periods (TTL/4) with the lease free
	_, acting = old.l.Leading()
	assert.False(t, acting, "an ineligible serve took the lease")
	why.Store(nil)
	require.Eventually(t, func() bool { _, ok := old.l.Leading(); return ok }, 5*time.Second, 5*time.Millisecond)
}
