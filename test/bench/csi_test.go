package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/test/testtools"
)

// BenchmarkCSICreate100: 100 volumes created at once through the unmodified Kubernetes
// CSI driver (linstor-csi, built by .ci/run), as the external-provisioner calls it
// (CreateVolume over its gRPC socket, 16 MiB, placementCount 2 on the thin pools of
// three in-process sim agents). Per volume: CreateVolume's latency (the driver's LINSTOR
// calls until it answers), and from the call to both disks UpToDate in Cairn's views
// (projections.ReplicaUpToDate: each disk's agent reports it applied at its incarnation
// and UpToDate), both from the first call; a failed call is sent again as the
// external-provisioner does (retried_calls counts them). Reports p50/p99 of both and the
// wall time to the last one.
//
//	go test -run XXX -bench CSICreate100 -benchtime 1x ./test/bench/
func BenchmarkCSICreate100(b *testing.B) {
	testtools.Need(b, "drbdadm", "drbdmeta")
	driver := testtools.Path(b, "linstor-csi")
	const n = 100
	for range b.N {
		s := servertest.Start(b, func(c *server.Config) { benchServer(c); c.HTTPListen = "127.0.0.1:0" })
		nc := servertest.Client(b, s)
		request(b, nc, "cluster.create", `{"name":"c1"}`)
		base := b.TempDir()
		for i := 1; i <= 3; i++ {
			node := fmt.Sprintf("n%d", i)
			request(b, nc, "node.add", fmt.Sprintf(`{"name":%q,"host":"h%d","address":"10.0.0.%d"}`, node, i, i))
			request(b, nc, "sp.create", fmt.Sprintf(`{"node":%q,"name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":1073741824}`, node))
			simAgent(b, s.NATSAddr, node, filepath.Join(base, node), nil)
		}
		sock := filepath.Join(b.TempDir(), "csi.sock")
		ctx, cancel := context.WithCancel(context.Background())
		drv := exec.CommandContext(ctx, driver, "--linstor-endpoint", "http://"+s.HTTPAddr, "--csi-endpoint", "unix://"+sock, "--node", "n1",
			"--log-level", "warn", "--enable-volume-snapshot-classes=false", "--disable-rwx-block-validation")
		if err := drv.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cancel(); _ = drv.Wait() })
		waitFor(b, 30*time.Second, func() bool { _, err := os.Stat(sock); return err == nil })
		conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		ctl := csi.NewControllerClient(conn)
		params := map[string]string{"linstor.csi.linbit.com/placementCount": "2", "linstor.csi.linbit.com/storagePool": "thin",
			"linstor.csi.linbit.com/resourceGroup": "bench"}

		started := make([]time.Time, n)
		answered := make([]time.Duration, n)
		ids := make([]string, n)
		start := time.Now()
		var wg sync.WaitGroup
		var retries atomic.Int64
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				started[i] = time.Now()
				req := &csi.CreateVolumeRequest{Name: fmt.Sprintf("pvc-bench-%03d", i), Parameters: params,
					CapacityRange: &csi.CapacityRange{RequiredBytes: 16 << 20},
					VolumeCapabilities: []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
						AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}}}
				// As Kubernetes' external-provisioner does: a failed CreateVolume is sent
				// again after a back-off (1 s, doubling), the same name making it idempotent.
				var resp *csi.CreateVolumeResponse
				var err error
				for attempt, wait := 1, time.Second; ; attempt, wait = attempt+1, wait*2 {
					if resp, err = ctl.CreateVolume(ctx, req); err == nil {
						break
					}
					retries.Add(1)
					if attempt == 6 {
						errs <- fmt.Errorf("volume %d after %d attempts: %w", i, attempt, err)
						return
					}
					time.Sleep(wait)
				}
				answered[i] = time.Since(started[i])
				ids[i] = resp.GetVolume().GetVolumeId()
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		upToDate := make([]time.Duration, n)
		left := n
		waitFor(b, 10*time.Minute, func() bool {
			v, err := s.DB.Read()
			if err != nil {
				b.Fatal(err)
			}
			defer v.Close()
			now := time.Now()
			for i, id := range ids {
				if upToDate[i] != 0 {
					continue
				}
				rd, ok, err := v.ResourceDefinition(id)
				if err != nil || !ok {
					continue
				}
				st, err := v.ResourceStatus(id)
				if err != nil {
					b.Fatal(err)
				}
				disks := 0
				for _, r := range rd.Replicas {
					if !r.Diskless && projections.ReplicaUpToDate(rd, r, st) {
						disks++
					}
				}
				if disks >= 2 {
					upToDate[i] = now.Sub(started[i])
					left--
				}
			}
			return left == 0
		})
		wall := time.Since(start)
		b.ReportMetric(pct(answered, 50).Seconds(), "create_p50_s")
		b.ReportMetric(pct(answered, 99).Seconds(), "create_p99_s")
		b.ReportMetric(pct(upToDate, 50).Seconds(), "uptodate_p50_s")
		b.ReportMetric(pct(upToDate, 99).Seconds(), "uptodate_p99_s")
		b.ReportMetric(wall.Seconds(), "wall_s")
		b.ReportMetric(float64(retries.Load()), "retried_calls")
		cancel()
	}
}

// pct is the p-th percentile of d (nearest rank).
func pct(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)*p+99)/100-1]
}
