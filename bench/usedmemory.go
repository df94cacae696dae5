package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"runtime"
	"strconv"
	"time"
)

// UsedMemory is issue 14's memory check of the no-GET hot path: wave keeps the whole data of
// the ConfigMaps that opted-in workloads use, digests of the rest. RSS with the used ones
// alone, and with many unused ones beside them, each after every used ConfigMap changed once
// (so that each is kept whole), and the API requests per change.
type UsedMemory struct {
	Used           int     `json:"used"`   // ConfigMaps of 16 KiB, each used by one Deployment
	Unused         int     `json:"unused"` // ConfigMaps of 16 KiB nobody uses
	RSSUsedOnly    float64 `json:"rss_used_only_mib"`
	RSSWithUnused  float64 `json:"rss_with_unused_mib"`
	RequestsPerChg float64 `json:"requests_per_change"` // wave's workloads client (Events have their own), over the Used changes
}

func waveUsedMemory(e *env, r *report) error {
	m := UsedMemory{Used: e.reps(100, 1000), Unused: e.reps(1000, 10000)}
	payload := make([]byte, 12<<10)
	_, _ = rand.Read(payload)
	value := base64.StdEncoding.EncodeToString(payload) // 16 KiB
	sized := func(i int) string { return strconv.Itoa(i) + value[len(strconv.Itoa(i)):] }
	ns, err := e.namespace("used-memory")
	if err != nil {
		return err
	}
	if err := parallel(m.Used, func(i int) error {
		return e.createConfigMap(ns, fmt.Sprintf("cm-%d", i), map[string]string{"a": sized(i)})
	}); err != nil {
		return err
	}
	if err := e.deployments(ns, m.Used, func(i int) string { return fmt.Sprintf("cm-%d", i) }); err != nil {
		return err
	}
	round := 0
	measure := func() (float64, float64, error) {
		runtime.GC()
		p, err := e.startWave(ns)
		if err != nil {
			return 0, 0, err
		}
		defer p.stop()
		if err := waitFor(e.ctx, 10*time.Minute, func() bool {
			return p.metric(`configwave_wave_reconciles_total{result="baseline"}`)+p.metric(`configwave_wave_reconciles_total{result="unchanged"}`) >= float64(m.Used)
		}); err != nil {
			return 0, 0, err
		}
		round++
		before := p.metric(`configwave_wave_api_requests_total{client="workloads"`)
		if err := parallel(m.Used, func(i int) error {
			return e.patchConfigMap(ns, fmt.Sprintf("cm-%d", i), "a", sized(i+round*m.Used))
		}); err != nil {
			return 0, 0, err
		}
		if err := waitFor(e.ctx, 10*time.Minute, func() bool {
			return p.metric(`configwave_wave_reconciles_total{result="rolled"}`) >= float64(m.Used)
		}); err != nil {
			return 0, 0, err
		}
		time.Sleep(3 * time.Second)
		reqs := (p.metric(`configwave_wave_api_requests_total{client="workloads"`) - before) / float64(m.Used)
		return float64(rssKiB(p.cmd.Process.Pid)) / 1024, reqs, nil
	}
	if m.RSSUsedOnly, m.RequestsPerChg, err = measure(); err != nil {
		return err
	}
	if err := parallel(m.Unused, func(i int) error {
		return e.createConfigMap(ns, fmt.Sprintf("unused-%05d", i), map[string]string{"config.yaml": sized(i)})
	}); err != nil {
		return err
	}
	if m.RSSWithUnused, _, err = measure(); err != nil {
		return err
	}
	r.UsedMemory = &m
	return nil
}
