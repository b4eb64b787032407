package zfs

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// zdbLabel is one LABEL section of `zdb -lluuuu` output.
type zdbLabel struct {
	config map[string]string // top-level config pairs, quotes stripped; vdev_tree.ashift too
	slots  map[int]map[string]string
	// invalid lists the slots zdb printed as "Uberblock[i] invalid".
	invalid map[int]bool
}

var (
	zdbLabelRE = regexp.MustCompile(`^LABEL (\d+)$`)
	zdbUberRE  = regexp.MustCompile(`^    Uberblock\[(\d+)\]( invalid)?$`)
	zdbPairRE  = regexp.MustCompile(`^(\s+)([a-z_]+)(?::| =) ?(.*)$`)
	// zdbRootBPRE picks the logical birth, fill and checksum out of zdb's rootbp line.
	zdbRootBPRE = regexp.MustCompile(`birth=(\d+)L/\d+P fill=(\d+) cksum=([0-9a-f]+:[0-9a-f]+:[0-9a-f]+:[0-9a-f]+)`)
)

// parseZdb reads `zdb -lluuuu` output: label configs and every uberblock slot.
func parseZdb(t testing.TB, r io.Reader) map[int]*zdbLabel {
	t.Helper()
	labels := map[int]*zdbLabel{}
	// zdb prints a config once, in the first label holding it, followed by
	// "labels = 0 1 2 3" naming every label with the same config.
	configOf := map[int]map[string]string{}
	var cur *zdbLabel
	var slot map[string]string
	inTree := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if m := zdbLabelRE.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			cur = &zdbLabel{config: map[string]string{}, slots: map[int]map[string]string{}, invalid: map[int]bool{}}
			labels[n] = cur
			slot, inTree = nil, false
			continue
		}
		if cur == nil {
			continue
		}
		if m := zdbUberRE.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			if m[2] != "" {
				cur.invalid[n] = true
				slot = nil
			} else {
				slot = map[string]string{}
				cur.slots[n] = slot
			}
			continue
		}
		m := zdbPairRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		indent, key, val := m[1], m[2], strings.Trim(m[3], "'")
		switch {
		case slot != nil && indent == "\t":
			if key == "timestamp" {
				val = strings.Fields(val)[0]
			}
			slot[key] = val
		case slot == nil && indent == "    ":
			inTree = key == "vdev_tree"
			if key != "labels" {
				cur.config[key] = val
				break
			}
			for _, f := range strings.Fields(val) {
				n, _ := strconv.Atoi(f)
				configOf[n] = cur.config
			}
		case slot == nil && inTree && indent == "        " && key == "ashift":
			cur.config["vdev_tree.ashift"] = val
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for n, c := range configOf {
		if l, ok := labels[n]; ok {
			l.config = c
		}
	}
	return labels
}

// loadImage gunzips a fixture leaf into memory.
func loadImage(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixtureLeaves lists the fixture images: testdata/<image>/<leaf>.img.gz.
func fixtureLeaves(t testing.TB) []string {
	t.Helper()
	m, err := filepath.Glob("testdata/*/*.img.gz")
	if err != nil || len(m) == 0 {
		t.Fatalf("no fixtures under testdata (%v)", err)
	}
	return m
}

func u64(t testing.TB, s string, base int) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, base, 64)
	if err != nil {
		t.Fatalf("zdb value %q: %v", s, err)
	}
	return v
}

// TestReaderMatchesZdb checks the reader against zdb -lluuuu of the same real OpenZFS
// leaf, field by field: every label config, every valid and every invalid slot.
func TestReaderMatchesZdb(t *testing.T) {
	for _, img := range fixtureLeaves(t) {
		name := strings.TrimSuffix(img, ".img.gz")
		t.Run(strings.TrimPrefix(name, "testdata/"), func(t *testing.T) {
			b := loadImage(t, img)
			zf, err := os.Open(name + ".zdb")
			if err != nil {
				t.Fatal(err)
			}
			defer zf.Close()
			want := parseZdb(t, zf)
			lf, err := ReadLeaf(Device{Name: img, R: bytes.NewReader(b), Size: int64(len(b))})
			if err != nil {
				t.Fatal(err)
			}
			configs := 0
			for _, lb := range lf.Labels {
				if lb.Config != nil {
					configs++
				}
			}
			if configs != len(want) || configs != 4 {
				t.Fatalf("labels with a config: reader %d, zdb %d (want 4)", configs, len(want))
			}
			total, rootBPs := 0, 0
			for l, zl := range want {
				lb := lf.Labels[l]
				if lb.Err != nil {
					t.Fatalf("label %d: %v", l, lb.Err)
				}
				c := lb.Info
				checks := []struct {
					key string
					got string
				}{
					{"name", c.PoolName},
					{"state", fmt.Sprint(c.State)},
					{"txg", fmt.Sprint(c.TXG)},
					{"pool_guid", fmt.Sprint(c.PoolGUID)},
					{"hostid", fmt.Sprint(c.HostID)},
					{"hostname", c.Hostname},
					{"guid", fmt.Sprint(c.GUID)},
					{"top_guid", fmt.Sprint(c.TopGUID)},
					{"version", fmt.Sprint(c.Version)},
					{"vdev_tree.ashift", fmt.Sprint(c.Ashift)},
				}
				for _, ck := range checks {
					if w, ok := zl.config[ck.key]; !ok || w != ck.got {
						t.Errorf("label %d %s: reader %q, zdb %q (present %v)", l, ck.key, ck.got, w, ok)
					}
				}
				bySlot := map[int]Slot{}
				for _, s := range lf.Slots {
					if s.Label == l {
						bySlot[s.Index] = s
					}
				}
				if n := len(zl.slots) + len(zl.invalid); n != ringSize/lf.SlotSize {
					t.Errorf("label %d: zdb lists %d slots, ring has %d", l, n, ringSize/lf.SlotSize)
				}
				if len(bySlot) != len(zl.slots) {
					t.Errorf("label %d: reader has %d valid slots, zdb %d", l, len(bySlot), len(zl.slots))
				}
				for i := range zl.invalid {
					if _, ok := bySlot[i]; ok {
						t.Errorf("label %d slot %d: valid for the reader, invalid for zdb", l, i)
					}
				}
				for i, zs := range zl.slots {
					s, ok := bySlot[i]
					if !ok {
						t.Errorf("label %d slot %d: zdb has an uberblock, the reader none", l, i)
						continue
					}
					total++
					u := s.Uberblock
					eq := func(field string, got uint64, base int) {
						t.Helper()
						w, ok := zs[field]
						if !ok {
							t.Errorf("label %d slot %d: zdb prints no %s", l, i, field)
							return
						}
						if u64(t, w, base) != got {
							t.Errorf("label %d slot %d %s: reader %d, zdb %s", l, i, field, got, w)
						}
					}
					eq("magic", u.Magic, 16)
					eq("version", u.Version, 10)
					eq("txg", u.TXG, 10)
					eq("guid_sum", u.GUIDSum, 10)
					eq("timestamp", u.Timestamp, 10)
					eq("mmp_magic", u.MMPMagic, 16)
					eq("checkpoint_txg", u.CheckpointTXG, 10)
					// ub_rootbp: zdb prints "... birth=4L/4P fill=41 cksum=w0:w1:w2:w3".
					if rb, ok := zs["rootbp"]; ok {
						m := zdbRootBPRE.FindStringSubmatch(rb)
						if m == nil {
							t.Fatalf("label %d slot %d: rootbp %q not understood", l, i, rb)
						}
						if u64(t, m[1], 10) != u.RootBP.Birth || u64(t, m[2], 10) != u.RootBP.Fill {
							t.Errorf("label %d slot %d rootbp birth/fill: reader %d/%d, zdb %s", l, i, u.RootBP.Birth, u.RootBP.Fill, rb)
						}
						for w, hex := range strings.Split(m[3], ":") {
							if u64(t, hex, 16) != u.RootBP.Checksum[w] {
								t.Errorf("label %d slot %d rootbp cksum word %d: reader %x, zdb %s", l, i, w, u.RootBP.Checksum[w], hex)
							}
						}
						rootBPs++
					}
					if u.MMPValid() {
						eq("mmp_delay", u.MMPDelay, 10)
						eq("mmp_valid", u.MMPConfig&0xff, 16)
						if u.SeqValid() {
							eq("mmp_seq", u.MMPSeq(), 10)
						}
						if u.FailValid() {
							eq("mmp_fail", u.MMPFailIntervals(), 10)
						}
						if u.IntervalValid() {
							eq("mmp_write", u.MMPInterval(), 10)
						}
					} else if _, ok := zs["mmp_delay"]; ok {
						t.Errorf("label %d slot %d: zdb prints MMP fields, reader finds MMP invalid", l, i)
					}
				}
			}
			if total == 0 || rootBPs != total {
				t.Fatalf("%d uberblocks compared, %d root block pointers", total, rootBPs)
			}
		})
	}
}
