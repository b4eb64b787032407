package test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/test/testtools"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Kubernetes CSI driver for LINSTOR, unmodified (linstor-csi 1.12.0, built by
// ../shared/tools/linstor-csi/build.sh, which .ci/run runs), against `cairn serve` with
// three sim agents, under the CSI conformance suite csi-sanity: every Identity and
// Controller spec passes (the Node specs need mounts and are skipped). The driver runs
// without Kubernetes as that folder's README says; the StorageClass parameters are
// csi-sanity's test volume parameters.
func TestCSISanity(t *testing.T) {
	driver, sanity := testtools.Path(t, "linstor-csi"), testtools.Path(t, "csi-sanity")
	c := startSimCluster(t, 3)
	dir := t.TempDir()
	sock := filepath.Join(dir, "csi.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	drv := exec.CommandContext(ctx, driver, "--linstor-endpoint", c.s.url(""), "--csi-endpoint", "unix://"+sock, "--node", "n1",
		"--log-level", "debug", "--enable-volume-snapshot-classes=false", "--disable-rwx-block-validation")
	drvLog := &syncBuffer{}
	drv.Stdout, drv.Stderr = drvLog, drvLog
	require.NoError(t, drv.Start())
	t.Cleanup(func() {
		cancel()
		_ = drv.Wait()
		if t.Failed() {
			t.Logf("linstor-csi log (tail):\n%s", tailText(drvLog.String(), 40))
		}
	})
	require.Eventually(t, func() bool { _, err := os.Stat(sock); return err == nil }, 30*time.Second, 50*time.Millisecond, "the driver never listened")
	params := filepath.Join(dir, "params.yaml")
	require.NoError(t, os.WriteFile(params, []byte("linstor.csi.linbit.com/placementCount: \"2\"\nlinstor.csi.linbit.com/storagePool: thin\nlinstor.csi.linbit.com/resourceGroup: csi-sanity\n"), 0o644))

	sctx, scancel := context.WithTimeout(ctx, 10*time.Minute)
	defer scancel()
	start := time.Now()
	// Its mount and staging directories in the test's own directory: its defaults
	// (/tmp/csi-mount, /tmp/csi-staging) are left behind by a run that was killed, and
	// every spec of the next run then fails creating them.
	out, err := exec.CommandContext(sctx, sanity, "--csi.endpoint", "unix://"+sock, "--ginkgo.skip", "Node Service",
		"--csi.mountdir", filepath.Join(dir, "mount"), "--csi.stagingdir", filepath.Join(dir, "staging"),
		"--ginkgo.no-color", "--csi.testvolumeparameters", params, "--csi.testvolumesize", "16777216").CombinedOutput()
	took := time.Since(start)
	summary := regexp.MustCompile(`(\d+) Passed \| (\d+) Failed`).FindStringSubmatch(string(out))
	require.NotNil(t, summary, "csi-sanity printed no summary (%v):\n%s", err, tailText(string(out), 60))
	passed, _ := strconv.Atoi(summary[1])
	failed, _ := strconv.Atoi(summary[2])
	t.Logf("csi-sanity: %d passed, %d failed in %s", passed, failed, took.Round(time.Millisecond))
	if failed > 0 || err != nil {
		var fails []string
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "[FAIL]") {
				fails = append(fails, strings.TrimSpace(line))
			}
		}
		t.Errorf("csi-sanity failed (%v):\n%s\n\n%s", err, strings.Join(fails, "\n"), tailText(string(out), 80))
	}
	assert.GreaterOrEqual(t, passed, 58, "fewer specs ran than the Identity and Controller suites hold")
}
