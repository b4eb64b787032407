package events

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"sync"
	"testing"

	json "github.com/segmentio/encoding/json"
)

// coldDecodeEnv makes the test binary the cold process of TestColdConcurrentDecode.
const coldDecodeEnv = "CAIRN_COLD_DECODE_CHILD"

// TestColdConcurrentDecode (issue 11): a serve once panicked inside goccy/go-json's
// struct decoder on its first cluster.create, the pattern of goccy/go-json#495 (first
// use of a type's decoder from several goroutines at once). Each round starts a fresh
// process (nothing compiled or cached) in which 16 goroutines per registered event type
// decode that type's envelope and payload at the same instant; a panic or a data race
// (under -race) fails the round.
func TestColdConcurrentDecode(t *testing.T) {
	if os.Getenv(coldDecodeEnv) == "1" {
		coldDecodeChild()
		return
	}
	rounds := 20
	if testing.Short() {
		rounds = 3
	}
	for i := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestColdConcurrentDecode$", "-test.count=1")
		cmd.Env = append(os.Environ(), coldDecodeEnv+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("round %d: the cold process failed: %v\n%s", i, err, out)
		}
	}
}

func coldDecodeChild() {
	regMu.RLock()
	var types []*Type
	for _, t := range registry {
		types = append(types, t)
	}
	regMu.RUnlock()
	sort.Slice(types, func(i, j int) bool { return types[i].Name < types[j].Name })
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 16*len(types)+1)
	for _, t := range types {
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					if r := recover(); r != nil {
						errs <- fmt.Errorf("%s: panic: %v", t.Name, r)
					}
				}()
				<-start
				var env Envelope
				body := fmt.Sprintf(`{"id":"x","type":%q,"schema_version":1,"subject":"s","occurred_at":"2026-12-02T00:00:00Z","command_id":"c","actor":"a","payload":{}}`, t.Name)
				if err := json.Unmarshal([]byte(body), &env); err != nil {
					errs <- fmt.Errorf("%s envelope: %v", t.Name, err)
				}
				_ = json.Unmarshal(env.Payload, t.New()) // decoding {} must not panic; field errors do not matter here
				if _, err := json.Marshal(t.New()); err != nil {
					errs <- fmt.Errorf("%s encode: %v", t.Name, err)
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
