package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sort"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

// watchers run the demo's observers of one change side by side; an observer's error is
// printed where it happened, in order with the rest.
type watchers struct {
	ctx context.Context
	p   *printer
	wg  sync.WaitGroup
}

func (w *watchers) add(f func() error) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		if err := f(); err != nil && w.ctx.Err() == nil {
			w.p.event("error: %v", err)
		}
	}()
}

func (w *watchers) wait() { w.wg.Wait() }

// followRollout prints wave's part of the change and the rollout it starts.
func (d *demo) followRollout(ctx context.Context, w *watchers, oldRS string) {
	w.add(func() error {
		var hash string
		err := waitFor(ctx, func() bool {
			dep, err := d.client.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
			hash = ""
			if err == nil {
				hash = dep.Spec.Template.Annotations["wave.pusher.com/config-hash"]
			}
			return hash != ""
		})
		if err == nil {
			d.event("wave: Deployment app template annotation wave.pusher.com/config-hash = %s…", hash[:16])
		}
		return err
	})
	w.add(func() error {
		var newRS string
		err := waitFor(ctx, func() bool {
			names, err := replicaSets(ctx, d.client)
			for _, n := range names {
				if n != oldRS {
					newRS = n
				}
			}
			return err == nil && newRS != ""
		})
		if err != nil {
			return err
		}
		d.event("kube-controller-manager: new ReplicaSet %s created", newRS)
		if err := testcluster.WaitDeploymentComplete(ctx, d.client, ns, "app", 2*time.Minute); err != nil {
			return err
		}
		if err := waitFor(ctx, func() bool { return podsOf(ctx, d.client, oldRS) == 0 }); err != nil {
			return err
		}
		d.event("rollout complete: %s 2/2 ready, old ReplicaSet %s scaled to 0, its pods gone", newRS, oldRS)
		return nil
	})
}

func replicaSets(ctx context.Context, client kubernetes.Interface) ([]string, error) {
	list, err := client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=app"})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, rs := range list.Items {
		names = append(names, rs.Name)
	}
	sort.Strings(names)
	return names, nil
}

func podsOf(ctx context.Context, client kubernetes.Interface, rs string) int {
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=app"})
	if err != nil {
		return -1
	}
	n := 0
	for _, p := range list.Items {
		for _, o := range p.OwnerReferences {
			if o.Name == rs {
				n++
			}
		}
	}
	return n
}

func waitFor(ctx context.Context, cond func() bool) error {
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return nil
}

// startBinary runs one of our binaries with its output in logFile; the returned function stops
// it. Pdeathsig makes sure it dies with the demo even on a crash.
func startBinary(bin, logFile string, args ...string) (func(), error) {
	f, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}, nil
}
